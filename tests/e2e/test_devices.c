/*
 * test_devices.c: `hearth devices` end to end: the CPU line, one block per
 * Vulkan device the runtime finds (the same names, in the same order), one
 * line and exit 0 when there is no Vulkan driver, --help and a bad option.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#ifdef HEARTH_VULKAN
#include "backend/vk/vk.h"
#endif

static int run(const char *arg, char **out, char **err)
{
    const char *argv[] = {tu_bin(), "devices", arg, NULL};
    return tu_run(argv, NULL, out, err, 120);
}

static void test_lists_cpu_and_vulkan(void **state)
{
    char *out = NULL, *err = NULL;
    int rc = run(NULL, &out, &err);
    if (rc != 0)
        print_message("# rc %d, stderr: %s\n", rc, err);
    assert_int_equal(rc, 0);
    print_message("%s", out);
    assert_true(!strncmp(out, "cpu: ", 5));
    assert_non_null(strstr(out, " cores, "));
    assert_non_null(strstr(out, " GiB RAM, kernels "));
#ifdef HEARTH_VULKAN
    struct vk_device_info *info = NULL;
    int n                       = 0;
    char why[HEARTH_ERR_MAX];
    if (vk_enumerate(&info, &n, why, sizeof why) != HEARTH_OK || n == 0) {
        assert_non_null(strstr(out, "\nvulkan: no "));
    } else {
        for (int i = 0; i < n; i++) {
            char want[300];
            snprintf(want, sizeof want, "\nvulkan%d: %s\n", i, info[i].name);
            assert_non_null(strstr(out, want));
        }
        char past[32];
        snprintf(past, sizeof past, "\nvulkan%d: ", n);
        assert_null(strstr(out, past));
        assert_non_null(strstr(out, " GiB device-local\n"));
        assert_non_null(strstr(out, "    features  fp16 "));
    }
    free(info);
#else
    assert_non_null(strstr(out, "\nvulkan: not built into this hearth"));
#endif
    free(out);
    free(err);
}

/* A loader that finds no driver: one line, and still an answer. */
static void test_no_driver(void **state)
{
    setenv("VK_ICD_FILENAMES", "/nonexistent/hearth-no-icd.json", 1);
    setenv("VK_DRIVER_FILES", "/nonexistent/hearth-no-icd.json", 1);
    char *out = NULL, *err = NULL;
    int rc = run(NULL, &out, &err);
    unsetenv("VK_ICD_FILENAMES");
    unsetenv("VK_DRIVER_FILES");
    assert_int_equal(rc, 0);
    const char *vk = strstr(out, "\nvulkan");
    assert_non_null(vk);
#ifdef HEARTH_VULKAN
    /* no loader at all says "no Vulkan loader"; a loader without drivers, this */
    assert_true(!strncmp(vk, "\nvulkan: no Vulkan driver", 25) ||
                !strncmp(vk, "\nvulkan: no Vulkan loader", 25));
#endif
    /* the one line, and the last */
    const char *nl = strchr(vk + 1, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
    free(out);
    free(err);
}

/*
 * HEARTH_VK_MEMORY_MIB, the test knob for the memory check at load, is the
 * figure every device shows; a value that is not a positive count is ignored.
 */
static void test_memory_knob(void **state)
{
#ifdef HEARTH_VULKAN
    struct vk_device_info *info = NULL;
    int n                       = 0;
    char why[HEARTH_ERR_MAX];
    const bool any = vk_enumerate(&info, &n, why, sizeof why) == HEARTH_OK && n > 0;
    free(info);
    if (!any) {
        print_message("vulkan-test: skipped: no Vulkan device\n");
        skip();
    }
    char *out = NULL, *err = NULL;
    setenv("HEARTH_VK_MEMORY_MIB", "14", 1);
    assert_int_equal(run(NULL, &out, &err), 0);
    assert_non_null(strstr(out, "\n    memory    14.0 MiB device-local\n"));
    assert_int_equal((int)vk_device_memory(0), 14 << 20);
    free(out);
    free(err);
    const uint64_t real                = (unsetenv("HEARTH_VK_MEMORY_MIB"), vk_device_memory(0));
    static const char *const ignored[] = {"-3", "0", "12x", ""};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        setenv("HEARTH_VK_MEMORY_MIB", ignored[i], 1);
        assert_true(vk_device_memory(0) == real);
    }
    assert_int_equal(run(NULL, &out, &err), 0);
    unsetenv("HEARTH_VK_MEMORY_MIB");
    assert_null(strstr(out, "memory    14.0 MiB"));
    assert_true(real > (14u << 20));
    assert_int_equal(vk_device_memory(n), 0);
    free(out);
    free(err);
#else
    skip();
#endif
}

static void test_help_and_usage(void **state)
{
    char *out = NULL, *err = NULL;
    assert_int_equal(run("--help", &out, &err), 0);
    assert_true(!strncmp(out, "usage: hearth devices", 21));
    free(out);
    free(err);
    assert_int_equal(run("--bogus", &out, &err), 2);
    assert_non_null(strstr(err, "unknown option '--bogus'"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_cpu_and_vulkan),
        cmocka_unit_test(test_no_driver),
        cmocka_unit_test(test_memory_knob),
        cmocka_unit_test(test_help_and_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
