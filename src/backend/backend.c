/*
 * backend.c: the built-in backends by name. The CPU is the only one today;
 * a new backend adds its table to the list in backend_find.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

const struct backend *backend_find(const char *name)
{
    const struct backend *all[] = {backend_cpu()};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}

static const struct backend *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const char *want = getenv("HEARTH_BACKEND");
    chosen = backend_cpu();
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
