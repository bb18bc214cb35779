/*
 * clock.h: the one clock hearth times itself by (durations, deadlines,
 * throughput, metrics): CLOCK_MONOTONIC in seconds, which NTP and date
 * changes never step, so a difference of two readings is always elapsed time.
 */
#ifndef HEARTH_CLOCK_H
#define HEARTH_CLOCK_H

#include <time.h>

/*
 * Seconds since an arbitrary fixed point in the past (boot, on Linux): only
 * differences mean anything. Resolution about a nanosecond, so a double keeps
 * microseconds for centuries of uptime. Thread-safe; no allocation.
 */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
