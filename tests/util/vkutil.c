/*
 * vkutil.c: the Vulkan tests' shared fixture (vkutil.h). Built into every
 * test binary, with and without HEARTH_VULKAN, as the other test utilities are.
 */
#include "util/vkutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void test_not_built(void **state)
{
    print_message("vulkan-test: skipped: hearth is built without Vulkan "
                  "(needs libvulkan-dev and glslc)\n");
    skip();
}

int vku_not_built_main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_not_built)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#ifdef HEARTH_VULKAN

char vku_err[HEARTH_ERR_MAX];
char vku_skip_why[HEARTH_ERR_MAX];
struct vk_dev *vku_dev;

int vku_setup(void **state)
{
    struct vk_device_info *info = NULL;
    int n                       = 0;
    if (vk_enumerate(&info, &n, vku_err, sizeof vku_err) != HEARTH_OK)
        snprintf(vku_skip_why, sizeof vku_skip_why, "%s", vku_err);
    else if (n == 0)
        snprintf(vku_skip_why, sizeof vku_skip_why, "the loader found no Vulkan device");
    else if (vk_dev_open(0, 0, &vku_dev, vku_err, sizeof vku_err) != HEARTH_OK) {
        print_message("vk_dev_open: %s\n", vku_err);
        free(info);
        return -1;
    }
    free(info);
    *state = &vku_dev;
    return 0;
}

int vku_teardown(void **state)
{
    vk_dev_close(vku_dev);
    vku_dev = NULL;
    return 0;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

float vku_frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / (double)(1ull << 52)) * 2.0f - 1.0f;
}

struct vk_buf *vku_upload(struct vk_dev *d, const void *src, size_t len)
{
    struct vk_buf *b;
    OK(vk_buf_new(d, len, &b, vku_err, sizeof vku_err));
    if (src)
        OK(vk_buf_upload(b, 0, src, len, vku_err, sizeof vku_err));
    return b;
}

struct vk_buf *vku_zeros(struct vk_dev *d, size_t len)
{
    void *z = calloc(1, len);
    assert_non_null(z);
    struct vk_buf *b = vku_upload(d, z, len);
    free(z);
    return b;
}

void vku_download(struct vk_buf *b, void *dst, size_t len)
{
    OK(vk_buf_download(b, 0, dst, len, vku_err, sizeof vku_err));
}

#endif
