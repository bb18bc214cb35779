/* status.c: texts and HTTP codes of hearth_status, generated from HEARTH_STATUS_LIST. */
#include "hearth.h"

const char *hearth_status_str(enum hearth_status st)
{
    switch (st) {
#define X(name, text, http)                                                                        \
    case name:                                                                                     \
        return text;
        HEARTH_STATUS_LIST(X)
#undef X
    default:
        return "unknown status";
    }
}

int hearth_status_http(enum hearth_status st)
{
    switch (st) {
#define X(name, text, http)                                                                        \
    case name:                                                                                     \
        return http;
        HEARTH_STATUS_LIST(X)
#undef X
    default:
        return 500;
    }
}
