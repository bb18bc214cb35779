/*
 * depth.h: how many tokens a slot drafts, from how its drafts fared.
 *
 * Verification judges a slot's drafts in order and keeps them up to the
 * first its own sampling does not reproduce; each verify step feeds that
 * count back here. The recent keep rate (each step weighing 0.75 of the one
 * after it) then picks the depth that yields the most tokens per unit of a
 * verify step's cost. Pure arithmetic; one per slot, reset at a job's start.
 */
#ifndef HEARTH_SPEC_DEPTH_H
#define HEARTH_SPEC_DEPTH_H

#include <stdint.h>

struct spec_depth {
    int32_t draft_min, draft_max; /* the depths allowed (spec_params'); max 0: no drafting */
    double keep_s, keep_t;        /* drafts kept and judged, each step's weighing 0.75 of the
                                     one after it: their ratio is the recent keep rate */
    int32_t next;                 /* tokens to draft next, draft_min..draft_max (0 when off) */
};

/* A new job's: its drafts start as if three in four were kept. */
void spec_depth_start(struct spec_depth *d, int32_t draft_min, int32_t draft_max);
/* A verify step judged drafts: the first kept of the n_draft in its batch were reproduced. */
void spec_depth_judge(struct spec_depth *d, int32_t kept, int32_t n_draft);

#endif
