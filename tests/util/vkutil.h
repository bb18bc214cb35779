/*
 * vkutil.h: what the Vulkan kernel tests share (test_vk_moe, test_vk_deltanet):
 * the main of a build without Vulkan, a group setup that opens device 0 or
 * records why it cannot, and small helpers for device buffers. Every line
 * that skips starts with "vulkan-test: skipped: ", which .ci/run looks for.
 */
#ifndef HEARTH_VKUTIL_H
#define HEARTH_VKUTIL_H

#include <stddef.h>

#include "util/testutil.h"

/*
 * The whole main of a Vulkan test file in a build without Vulkan: one test
 * that prints the skip line and skips.
 */
int vku_not_built_main(void);

#ifdef HEARTH_VULKAN

#include "backend/vk/vk.h"
#include "hearth.h"

/* The message of the last call that failed; every call in the tests passes it. */
extern char vku_err[HEARTH_ERR_MAX];
/* Device 0, or NULL when there is none (vku_skip_why says why). */
extern struct vk_dev *vku_dev;
extern char vku_skip_why[HEARTH_ERR_MAX];

/*
 * Group setup: opens device 0 into vku_dev (and *state = &vku_dev), or
 * leaves it NULL with the reason in vku_skip_why when the loader or the
 * device is missing. Returns -1 (the message printed) only when a device is
 * listed but does not open.
 */
int vku_setup(void **state);
/* Group teardown: closes vku_dev. */
int vku_teardown(void **state);

/* Declares struct vk_dev *d = vku_dev, or skips the test saying why there is no device. */
/* clang-format off */
#define NEED_DEVICE(d)                                                                       \
    struct vk_dev *d = vku_dev;                                                              \
    (void)d;                                                                                 \
    if (!d) {                                                                                \
        print_message("vulkan-test: skipped: %s\n", vku_skip_why);                           \
        skip();                                                                              \
    }
/* clang-format on */

/* Asserts call returns HEARTH_OK, printing the call and vku_err when it does not. */
/* clang-format off */
#define OK(call)                                                                             \
    do {                                                                                     \
        enum hearth_status st_ = (call);                                                     \
        if (st_ != HEARTH_OK)                                                                \
            print_message("%s: %s\n", #call, vku_err);                                       \
        assert_int_equal(st_, HEARTH_OK);                                                    \
    } while (0)
/* clang-format on */

/* Records what call does (naming the sequence s) on device d and runs it. */
/* clang-format off */
#define RUN1(d, call)                                                                        \
    do {                                                                                     \
        struct vk_seq *s;                                                                    \
        OK(vk_seq_new(d, &s, vku_err, sizeof vku_err));                                      \
        OK(vk_seq_begin(s, vku_err, sizeof vku_err));                                        \
        OK(call);                                                                            \
        OK(vk_seq_run(s, vku_err, sizeof vku_err));                                          \
        vk_seq_free(s);                                                                      \
    } while (0)
/* clang-format on */

/* Uniform in [-1, 1): xorshift64 from a fixed seed, so every run draws the same values. */
float vku_frand(void);

/* A buffer of len bytes on d holding src (src NULL: left as allocated). */
struct vk_buf *vku_upload(struct vk_dev *d, const void *src, size_t len);
/* A buffer of len zero bytes on d. */
struct vk_buf *vku_zeros(struct vk_dev *d, size_t len);
/* Copies the first len bytes of b into dst. */
void vku_download(struct vk_buf *b, void *dst, size_t len);

#endif
#endif
