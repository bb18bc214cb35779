/*
 * sampler.h: what the scheduler needs of a sampler beyond hearth.h's
 * public calls: a pick restricted to the tokens a grammar allows, which
 * does not record the token (the scheduler may try a pick, find the
 * grammar refuses it, and pick again among the allowed tokens).
 */
#ifndef HEARTH_SAMPLER_H
#define HEARTH_SAMPLER_H

#include <stdint.h>

#include "hearth.h"

/*
 * Picks a token from logits as hearth_sampler_sample does, among the
 * tokens whose bit is set in allowed (bit i & 31 of allowed[i >> 5]; NULL:
 * every token), without adding it to the history (hearth_sampler_accept
 * does). -1 when allowed holds no token.
 */
hearth_token sampler_pick(struct hearth_sampler *s, const float *logits, const uint32_t *allowed);

#endif
