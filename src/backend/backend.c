/*
 * backend.c: the built-in backends by name: the CPU, and Vulkan when the
 * build has it (vk_backend.c); a new backend adds its table to
 * backend_find and its memory law to backend_law_of.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

const struct backend *backend_find(const char *name)
{
    char why[256];
    if (!strcmp(name, "cpu"))
        return backend_cpu();
    if (!strcmp(name, "vulkan"))
        return backend_vulkan(0, why, sizeof why);
    return NULL;
}

const struct backend_law *backend_law_of(enum backend_kind kind)
{
    static const struct backend_law *const laws[BACKEND_KINDS] = {
        [BACKEND_CPU]    = &backend_law_cpu,
        [BACKEND_VULKAN] = &backend_law_vulkan,
    };
    return laws[kind];
}

#ifndef HEARTH_VULKAN
const struct backend *backend_vulkan(int device, char *why, size_t why_len)
{
    snprintf(why, why_len,
             "this build has no Vulkan backend (it was built with HEARTH_VULKAN=0, "
             "or without libvulkan-dev and glslc)");
    return NULL;
}
#endif

static const struct backend *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const char *want = getenv("HEARTH_BACKEND");
    chosen           = backend_cpu();
    if (!want || !*want)
        return;
    const struct backend *b = backend_find(want);
    if (b) {
        chosen = b;
        return;
    }
    fprintf(stderr, "hearth: HEARTH_BACKEND=%s is not built in; using %s\n", want, chosen->name);
}

const struct backend *backend_get(void)
{
    pthread_once(&chosen_once, choose);
    return chosen;
}
