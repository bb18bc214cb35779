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
#include "sample/sampler.h"
#include "util/errfmt.h"
#include "util/rng.h"

struct cand {
    int32_t id;
    float logit; /* then probability, after softmax */
};

struct hearth_sampler {
    struct hearth_sampler_params p;
    int32_t n_vocab;
    struct cand *cands; /* [n_vocab] */
    hearth_token *hist; /* ring of the last repeat_last_n tokens */
    int32_t n_hist, hist_pos;
    uint64_t rng[4];
};

struct hearth_sampler_params hearth_sampler_default_params(void)
{
    return (struct hearth_sampler_params){.temperature    = 0.8f,
                                          .top_k          = 40,
                                          .top_p          = 0.95f,
                                          .min_p          = 0.05f,
                                          .repeat_penalty = 1.0f,
                                          .repeat_last_n  = 64,
                                          .seed           = 0};
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

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
static double next_unit(uint64_t s[4])
{
    return (next_u64(s) >> 11) * 0x1.0p-53;
}

enum hearth_status hearth_sampler_new(const struct hearth_sampler_params *params, int32_t n_vocab,
                                      struct hearth_sampler **out, char *err, size_t err_len)
{
    *out = NULL;
    if (n_vocab < 1)
        return fail(HEARTH_EINVAL, err, err_len, "sampler: the vocabulary has %d tokens", n_vocab);
    struct hearth_sampler *s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->p = params ? *params : hearth_sampler_default_params();
    if (s->p.repeat_last_n < 0)
        s->p.repeat_last_n = 0;
    s->n_vocab = n_vocab;
    s->cands   = malloc((size_t)n_vocab * sizeof *s->cands);
    s->hist    = malloc(((size_t)s->p.repeat_last_n + 1) * sizeof *s->hist);
    if (!s->cands || !s->hist)
        goto oom;
    uint64_t seed = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&seed);
    *out = s;
    return HEARTH_OK;
oom:
    hearth_sampler_free(s);
    return fail(HEARTH_ENOMEM, err, err_len, "sampler: out of memory for %d candidates", n_vocab);
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
    s->hist_pos          = (s->hist_pos + 1) % s->p.repeat_last_n;
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

static bool allowed_bit(const uint32_t *allowed, int32_t i)
{
    return !allowed || (allowed[i >> 5] >> (i & 31) & 1u);
}

/* The candidate of token t in c[0..n) (built in id order), or NULL. */
static struct cand *find_cand(struct cand *c, int32_t n, hearth_token t)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (c[mid].id < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && c[lo].id == t ? &c[lo] : NULL;
}

/*
 * Sorts the best candidates of c[0..n) to the front, descending, until
 * their probability mass (p = exp(logit - max) / sum) reaches top_p, and
 * returns how many that takes. Selecting a growing top-k and sorting only
 * it keeps a 150k vocabulary from being sorted whole for every token.
 */
static int32_t sort_nucleus(struct cand *c, int32_t n, float max, double sum, float top_p)
{
    for (int32_t k = n < 64 ? n : 64;; k = k * 4 < n ? k * 4 : n) {
        if (k < n)
            select_top(c, n, k);
        qsort(c, (size_t)k, sizeof *c, by_logit_desc);
        double cum = 0;
        for (int32_t i = 0; i < k; i++) {
            cum += (float)(expf(c[i].logit - max) / sum);
            if (cum >= top_p)
                return i + 1;
        }
        if (k == n)
            return n;
    }
}

hearth_token sampler_pick(struct hearth_sampler *s, const float *logits, const uint32_t *allowed)
{
    const int32_t nv = s->n_vocab;
    struct cand *c   = s->cands;
    int32_t n        = 0;
    if (!allowed) {
        for (int32_t i = 0; i < nv; i++)
            c[i] = (struct cand){i, logits[i]};
        n = nv;
    } else {
        for (int32_t w = 0; w < (nv + 31) / 32; w++)
            for (uint32_t bits = allowed[w]; bits; bits &= bits - 1) {
                int32_t i = w * 32 + __builtin_ctz(bits);
                if (i < nv)
                    c[n++] = (struct cand){i, logits[i]};
            }
        if (n == 0)
            return -1;
    }

    /* llama.cpp's rule: divide positive logits, multiply negative ones, once per distinct token */
    if (s->p.repeat_penalty != 1.0f && s->n_hist > 0) {
        for (int32_t i = 0; i < s->n_hist; i++) {
            hearth_token t = s->hist[i];
            if (t < 0 || t >= nv || !allowed_bit(allowed, t))
                continue;
            bool seen = false;
            for (int32_t j = 0; j < i && !seen; j++)
                seen = s->hist[j] == t;
            if (seen)
                continue;
            struct cand *ct = allowed ? find_cand(c, n, t) : &c[t];
            ct->logit =
                ct->logit > 0 ? ct->logit / s->p.repeat_penalty : ct->logit * s->p.repeat_penalty;
        }
    }

    if (s->p.temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (c[i].logit > c[best].logit)
                best = i;
        return c[best].id;
    }
    if (s->p.top_k > 0 && s->p.top_k < n)
        n = select_top(c, n, s->p.top_k);
    float max = c[0].logit;
    for (int32_t i = 1; i < n; i++)
        max = c[i].logit > max ? c[i].logit : max;
    if (s->p.top_p < 1.0f) {
        double sum = 0;
        for (int32_t i = 0; i < n; i++)
            sum += expf(c[i].logit - max);
        n = sort_nucleus(c, n, max, sum, s->p.top_p);
    }
    if (s->p.min_p > 0.0f) {
        /* p >= min_p * p_best, in logits; the survivors need no order */
        const float floor = max + logf(s->p.min_p);
        int32_t keep      = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].logit >= floor)
                c[keep++] = c[i];
        n = keep;
    }
    /* temperature on the survivors: p^(1/T) renormalised is exp((l - max) / T) renormalised,
     * one exp per candidate and no softmax at all when nothing is cut */
    const float inv_t = 1.0f / s->p.temperature;
    double tsum       = 0;
    for (int32_t i = 0; i < n; i++) {
        c[i].logit = expf((c[i].logit - max) * inv_t);
        tsum += c[i].logit;
    }
    double r = next_unit(s->rng) * tsum, acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += c[i].logit;
        if (r < acc)
            return c[i].id;
    }
    return c[n - 1].id;
}

hearth_token hearth_sampler_sample(struct hearth_sampler *s, const float *logits)
{
    hearth_token tok = sampler_pick(s, logits, NULL);
    hearth_sampler_accept(s, tok);
    return tok;
}
