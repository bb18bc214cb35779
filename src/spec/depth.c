/*
 * depth.c: a slot's draft depth (depth.h), by a cost model of the verify
 * step measured on the CPU's kernels.
 */
#include "spec/depth.h"

/*
 * What a verify step of `rows` rows of one slot costs against a decode on
 * the CPU's packed kernels, which take rows in eights, a last three or four
 * as a four and a last two as a pair (src/kernels; bench-1b Q4_0 on 2 Zen 5
 * cores, AVX-512, best of 20: pp1 11.4 ms, pp2 12.9, pp3 13.5, pp4 14.2,
 * pp6 18.7, pp8 20.5, pp12 30.7, pp16 38.4; Zen 4 pays about a third more
 * per row past four).
 */
static double rows_cost(int32_t rows)
{
    if (rows <= 2)
        return rows == 1 ? 1.0 : 1.13;
    if (rows <= 4)
        return 1.25;
    if (rows <= 8)
        return 1.25 + 0.135 * (rows - 4);
    return 1.79 + 0.2 * (rows - 8);
}

/*
 * The depth that yields the most tokens per unit of step cost for a slot
 * whose drafts are kept with probability p, each draft's keep depending on
 * the ones before: (1 + p + ... + p^d) / rows_cost(d + 1), over the depths
 * that fill the kernels' fours (1, 3, 7, 11, ..., and draft_max) within
 * draft_min and draft_max. p 0.2 gives 1, p 0.35 to 0.75 3, p 0.85 to
 * 0.95 (a loop) 7; a slot whose drafts all keep goes deeper when draft_max
 * allows.
 */
static int32_t depth_for(int32_t draft_min, int32_t draft_max, double p)
{
    int32_t best = draft_min;
    double value = 0;
    for (int32_t d = draft_min; d <= draft_max; d++) {
        if (d != 1 && d != draft_max && (d + 1) % 4)
            continue;
        double sum = 1, pk = 1;
        for (int32_t i = 1; i <= d; i++)
            sum += pk *= p;
        if (sum / rows_cost(d + 1) > value) {
            value = sum / rows_cost(d + 1);
            best  = d;
        }
    }
    return best;
}

void spec_depth_start(struct spec_depth *d, int32_t draft_min, int32_t draft_max)
{
    d->draft_min = draft_min;
    d->draft_max = draft_max;
    d->keep_s    = 3;
    d->keep_t    = 4;
    d->next      = draft_max > 0 ? depth_for(draft_min, draft_max, 0.75) : 0;
}

void spec_depth_judge(struct spec_depth *d, int32_t kept, int32_t n_draft)
{
    d->keep_s = 0.75 * d->keep_s + kept;
    d->keep_t = 0.75 * d->keep_t + kept + (kept < n_draft);
    d->next   = depth_for(d->draft_min, d->draft_max, d->keep_s / d->keep_t);
}
