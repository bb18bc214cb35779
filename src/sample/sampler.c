/*
 * sampler.c: turning logits into a token.
 *
 * The chain runs in llama.cpp's default order: repetition penalty, top-k,
 * top-p, min-p, temperature, then a draw from the distribution. Temperature
 * <= 0 is greedy (argmax, lowest id on ties). The generator is
 * xoshiro256** seeded through splitmix64, so a seed reproduces a run on any
 * machine. Scratch is sized once for the vocabulary: no allocation per token.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"
#include "util/rng.h"

struct cand {
    int32_t id;
    float logit; /* then probability, after softmax */
};

struct hearth_sampler {
    struct hearth_sampler_params p;
    int32_t n_vocab;
    struct cand *cands;  /* [n_vocab] */
    hearth_token *hist;  /* ring of the last repeat_last_n tokens */
    int32_t n_hist, hist_pos;
    uint64_t rng[4];
};

struct hearth_sampler_params hearth_sampler_default_params(void)
{
    return (struct hearth_sampler_params){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f,
                                          .min_p = 0.05f, .repeat_penalty = 1.0f,
                                          .repeat_last_n = 64, .seed = 0};
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t s[4])
{
    const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(uint64_t s[4]) { return (next_u64(s) >> 11) * 0x1.0p-53; }

struct hearth_sampler *hearth_sampler_new(const struct hearth_sampler_params *params,
                                          int32_t n_vocab)
{
    struct hearth_sampler *s = calloc(1, sizeof *s);
    if (!s || n_vocab < 1)
        goto err;
    s->p = params ? *params : hearth_sampler_default_params();
    if (s->p.repeat_last_n < 0)
        s->p.repeat_last_n = 0;
    s->n_vocab = n_vocab;
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->hist = malloc(((size_t)s->p.repeat_last_n + 1) * sizeof *s->hist);
    if (!s->cands || !s->hist)
        goto err;
    uint64_t seed = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&seed);
    return s;
err:
    hearth_sampler_free(s);
    return NULL;
}

void hearth_sampler_free(struct hearth_sampler *s)
{
    if (!s)
        return;
    free(s->cands);
    free(s->hist);
    free(s);
}

void hearth_sampler_accept(struct hearth_sampler *s, hearth_token tok)
{
    if (s->p.repeat_last_n == 0)
        return;
    s->hist[s->hist_pos] = tok;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->n_hist < s->p.repeat_last_n)
        s->n_hist++;
}

static int by_logit_desc(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

/* a ranks below b: lower logit, or the same logit and a higher id (by_logit_desc's order) */
static bool ranks_below(const struct cand *a, const struct cand *b)
{
    return a->logit < b->logit || (a->logit == b->logit && a->id > b->id);
}

/* Restores the heap below p (c[0..k), the weakest candidate at the root). */
static void sift_down(struct cand *c, int32_t k, int32_t p)
{
    for (;;) {
        int32_t m = p, l = 2 * p + 1, r = l + 1;
        if (l < k && ranks_below(&c[l], &c[m]))
            m = l;
        if (r < k && ranks_below(&c[r], &c[m]))
            m = r;
        if (m == p)
            return;
        struct cand t = c[p];
        c[p]          = c[m];
        c[m]          = t;
        p             = m;
    }
}

/*
 * Moves the k best candidates of c[0..n) (by_logit_desc's order) into
 * c[0..k), unordered, and returns k: a k-element heap whose root is the
 * weakest kept, O(n log k) instead of sorting the whole vocabulary.
 */
static int32_t select_top(struct cand *c, int32_t n, int32_t k)
{
    for (int32_t i = k / 2 - 1; i >= 0; i--)
        sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        if (ranks_below(&c[0], &c[i])) {
            c[0] = c[i];
            sift_down(c, k, 0);
        }
    }
    return k;
}

/* Softmax over cands[0..n) in place (logits become probabilities); cands sorted descending. */
static void softmax_sorted(struct cand *c, int32_t n)
{
    double sum = 0;
    const float max = c[0].logit;
    for (int32_t i = 0; i < n; i++) {
        c[i].logit = expf(c[i].logit - max);
        sum += c[i].logit;
    }
    for (int32_t i = 0; i < n; i++)
        c[i].logit = (float)(c[i].logit / sum);
}

hearth_token hearth_sampler_sample(struct hearth_sampler *s, const float *logits)
{
    const int32_t nv = s->n_vocab;
    struct cand *c = s->cands;
    for (int32_t i = 0; i < nv; i++)
        c[i] = (struct cand){i, logits[i]};

    /* llama.cpp's rule: divide positive logits, multiply negative ones, once per distinct token */
    if (s->p.repeat_penalty != 1.0f && s->n_hist > 0) {
        for (int32_t i = 0; i < s->n_hist; i++) {
            hearth_token t = s->hist[i];
            if (t < 0 || t >= nv)
                continue;
            bool seen = false;
            for (int32_t j = 0; j < i && !seen; j++)
                seen = s->hist[j] == t;
            if (seen)
                continue;
            c[t].logit = c[t].logit > 0 ? c[t].logit / s->p.repeat_penalty
                                        : c[t].logit * s->p.repeat_penalty;
        }
    }

    hearth_token tok;
    if (s->p.temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < nv; i++)
            if (c[i].logit > c[best].logit)
                best = i;
        tok = c[best].id;
    } else {
        int32_t n = nv;
        if (s->p.top_k > 0 && s->p.top_k < n)
            n = select_top(c, nv, s->p.top_k);
        qsort(c, (size_t)n, sizeof *c, by_logit_desc);
        softmax_sorted(c, n);
        if (s->p.top_p < 1.0f) {
            double cum = 0;
            int32_t keep = n;
            for (int32_t i = 0; i < n; i++) {
                cum += c[i].logit;
                if (cum >= s->p.top_p) {
                    keep = i + 1;
                    break;
                }
            }
            n = keep;
        }
        if (s->p.min_p > 0.0f) {
            const float floor = c[0].logit * s->p.min_p;
            int32_t keep = 1;
            while (keep < n && c[keep].logit >= floor)
                keep++;
            n = keep;
        }
        /* temperature on the survivors: p^(1/T), renormalised */
        double sum = 0;
        for (int32_t i = 0; i < n; i++) {
            c[i].logit = (float)pow(c[i].logit, 1.0 / s->p.temperature);
            sum += c[i].logit;
        }
        double r = next_unit(s->rng) * sum, acc = 0;
        tok = c[n - 1].id;
        for (int32_t i = 0; i < n; i++) {
            acc += c[i].logit;
            if (r < acc) {
                tok = c[i].id;
                break;
            }
        }
    }
    hearth_sampler_accept(s, tok);
    return tok;
}
