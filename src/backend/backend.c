/*
 * backend.c: which backend a model runs on. The CPU is the only one today;
 * a new backend adds its table to the list below.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

static const struct backend *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const struct backend *all[] = {backend_cpu()};
    const char *want = getenv("HEARTH_BACKEND");
    chosen = all[0];
    if (!want || !*want)
        return;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(all[i]->name, want)) {
            chosen = all[i];
            return;
        }
    fprintf(stderr, "hearth: HEARTH_BACKEND=%s is not built in; using %s\n", want, chosen->name);
}

const struct backend *backend_get(void)
{
    pthread_once(&chosen_once, choose);
    return chosen;
}
