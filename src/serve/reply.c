/* reply.c: what every reply shape shares (reply.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/reply.h"

bool reply_sse_event(char **buf, size_t *len, const char *name, const char *json)
{
    size_t add  = strlen("event: \ndata: \n\n") + strlen(name) + strlen(json);
    char *grown = realloc(*buf, *len + add + 1);
    if (!grown)
        return false;
    *buf = grown;
    snprintf(*buf + *len, add + 1, "event: %s\ndata: %s\n\n", name, json);
    *len += add;
    return true;
}
