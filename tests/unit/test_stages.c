/*
 * test_stages.c: layers across stages (src/model/stages.c). A model split
 * into several CPU stages (layer_split) must give the bits of one stage:
 * the same scenario (a chunked prompt, 32 greedy steps, a second sequence
 * reusing the first's published prefix, a truncation inside a shared block
 * that makes kv.c copy it, more steps) records every logit, and the split
 * runs must equal the unsplit run bit for bit. The splits put boundaries
 * where the state kinds change: between DeltaNet layers and between a
 * DeltaNet and an attention layer (tiny qwen35moe, three stages, whose
 * resumptions load state snapshots gathered over the stages), between
 * window and global layers with a window pool (tiny gemma3), between MoE
 * layers (tiny qwen3moe), and an output-only last stage. Then the
 * refusals: splits that do not add up, unknown backends, a GPU that is
 * not there, random strings; -ngl's placement with a stand-in GPU backend; and
 * kv.c's block-copy hook reaching a stand-in device stage's kv_copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"
#include "model/model.h"
#include "model/stages.h"
#include "util/engineutil.h"
#include "util/testutil.h"

enum { PROMPT = 70, STEPS = 32, TAIL = 10, MAX_REC = 2 * STEPS + 16 };

/* Every logit a scenario produces, in order, and the lengths it read back. */
struct record {
    float *logits; /* [MAX_REC][n_vocab] */
    int32_t n, n_vocab;
    int32_t lens[4];
};

static void keep(struct record *r, const float *l)
{
    assert_true(r->n < MAX_REC);
    memcpy(r->logits + (size_t)r->n++ * r->n_vocab, l, (size_t)r->n_vocab * sizeof(float));
}

/* n token ids below n_vocab past the first few (control tokens), a fixed function of i and salt. */
static void tokens(hearth_token *t, int32_t n, int32_t salt, int32_t n_vocab)
{
    for (int32_t i = 0; i < n; i++)
        t[i] = 3 + (i * 7919 + salt * 104729) % (n_vocab - 3);
}

/*
 * Decodes toks[len..n) into seq, len its length, in batches of chunk, keeping the last row's
 * logits, and publishes the sequence after each batch as a server does (so window blocks are
 * cached before the next reservation gives them back).
 */
static void run(struct hearth_context *ctx, struct record *r, int32_t seq, const hearth_token *toks,
                int32_t n, int32_t chunk)
{
    char err[HEARTH_ERR_MAX];
    int32_t pos[64], sq[64];
    const int32_t p0 = hearth_seq_len(ctx, seq);
    for (int32_t i = p0; i < n; i += chunk) {
        const int32_t m = n - i < chunk ? n - i : chunk;
        for (int32_t j = 0; j < m; j++) {
            pos[j] = i + j;
            sq[j]  = seq;
        }
        struct hearth_batch b = {m, toks + i, pos, sq, NULL};
        if (hearth_decode(ctx, &b, err, sizeof err) != HEARTH_OK)
            fail_msg("decode: %s", err);
        hearth_seq_publish(ctx, seq, toks, i + m);
        if (i + m == n)
            keep(r, hearth_get_logits(ctx, m - 1));
    }
}

/* Greedy steps on seq from the last logits kept, appending the tokens to toks. */
static void greedy(struct hearth_context *ctx, struct record *r, int32_t seq, hearth_token *toks,
                   int32_t *n_toks, int32_t steps)
{
    for (int32_t i = 0; i < steps; i++) {
        hearth_token t    = tu_argmax(r->logits + (size_t)(r->n - 1) * r->n_vocab, r->n_vocab);
        toks[(*n_toks)++] = t;
        run(ctx, r, seq, toks, *n_toks, 1);
    }
}

/*
 * The scenario, on a fresh context of model: every step's logits into r.
 * Returns 0, or -1 when the context cannot be made.
 */
static int scenario(struct hearth_model *model, struct record *r)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 256;
    cp.n_seq_max                    = 2;
    cp.n_batch                      = 32;
    cp.kv_block                     = 16;
    char err[HEARTH_ERR_MAX];
    struct hearth_context *ctx;
    if (hearth_context_new(model, &cp, &ctx, err, sizeof err) != HEARTH_OK) {
        print_message("context: %s\n", err);
        return -1;
    }
    r->n_vocab = hearth_model_n_vocab(model);
    r->n       = 0;
    hearth_token a[PROMPT + STEPS], b[PROMPT + STEPS];
    int32_t n_a = PROMPT;
    tokens(a, PROMPT, 1, r->n_vocab);
    run(ctx, r, 0, a, PROMPT, 32);
    greedy(ctx, r, 0, a, &n_a, STEPS);

    /* a second sequence shares the first's first blocks, then goes its own way */
    memcpy(b, a, (PROMPT - TAIL) * sizeof *b);
    tokens(b + PROMPT - TAIL, TAIL, 2, r->n_vocab);
    r->lens[0] = hearth_seq_reuse_prefix(ctx, 1, b, PROMPT);
    run(ctx, r, 1, b, PROMPT, 32);

    /* a cut inside a block the second sequence shares: kv.c copies it before it is written */
    hearth_seq_truncate(ctx, 0, 40);
    r->lens[1] = hearth_seq_len(ctx, 0);
    n_a        = r->lens[1];
    tokens(a + n_a, 12, 3, r->n_vocab);
    n_a += 12;
    run(ctx, r, 0, a, n_a, 5);
    greedy(ctx, r, 0, a, &n_a, 4);
    int32_t n_b = PROMPT;
    greedy(ctx, r, 1, b, &n_b, 4);
    r->lens[2] = hearth_seq_len(ctx, 0);
    r->lens[3] = hearth_seq_len(ctx, 1);
    hearth_context_free(ctx);
    return 0;
}

static struct hearth_model *load(const char *name, const char *split)
{
    const char *path = tu_model(name);
    if (!path)
        return NULL;
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 2;
    mp.layer_split                = split;
    struct hearth_model *m;
    char err[HEARTH_ERR_MAX];
    if (hearth_model_load(path, &mp, &m, err, sizeof err) != HEARTH_OK)
        fail_msg("%s with layer_split %s: %s", name, split ? split : "(none)", err);
    return m;
}

/*
 * Runs the scenario on name unsplit and under each split, and asserts the
 * logits and lengths are the same bits. Returns the unsplit record's lens.
 */
static void same_bits(const char *name, const char *const *splits, int n_splits, int32_t lens[4])
{
    struct hearth_model *whole = load(name, NULL);
    if (!whole) {
        print_message("skip: %s not found\n", name);
        skip();
    }
    struct record ref = {0}, got = {0};
    const size_t len = (size_t)MAX_REC * hearth_model_n_vocab(whole) * sizeof(float);
    ref.logits       = malloc(len);
    got.logits       = malloc(len);
    assert_non_null(ref.logits);
    assert_non_null(got.logits);
    assert_int_equal(scenario(whole, &ref), 0);
    hearth_model_free(whole);
    for (int i = 0; i < n_splits; i++) {
        struct hearth_model *m = load(name, splits[i]);
        int32_t n_ranges       = 1;
        for (const char *c = splits[i]; *c; c++)
            n_ranges += *c == ',';
        assert_int_equal(m->n_stage, n_ranges);
        assert_int_equal(scenario(m, &got), 0);
        hearth_model_free(m);
        size_t differ = 0;
        for (size_t j = 0; j < (size_t)ref.n * ref.n_vocab; j++)
            differ += memcmp(&ref.logits[j], &got.logits[j], sizeof(float)) != 0;
        print_message("%s %-22s %d logit rows, %zu values differ; reuse %d, cut to %d, "
                      "lengths %d %d\n",
                      name, splits[i], got.n, differ, got.lens[0], got.lens[1], got.lens[2],
                      got.lens[3]);
        assert_int_equal(got.n, ref.n);
        assert_int_equal(differ, 0);
        assert_memory_equal(got.lens, ref.lens, sizeof ref.lens);
    }
    memcpy(lens, ref.lens, sizeof ref.lens);
    free(ref.logits);
    free(got.logits);
}

static void test_llama_two_and_three_stages(void **state)
{
    static const char *const splits[] = {"cpu:2,cpu:3", "cpu:1,cpu:3,cpu:1", "cpu:5,cpu:0"};
    int32_t lens[4];
    same_bits("stories260K.gguf", splits, 3, lens);
    /* the scenario exercised what it means to: a reused prefix (three whole blocks and the
     * head of the next, copied) and a cut kept inside a block */
    assert_int_equal(lens[0], PROMPT - TAIL);
    assert_int_equal(lens[1], 40);
}

static void test_qwen35moe_deltanet_attention_boundary(void **state)
{
    /* layers 0-2 DeltaNet, 3 gated attention: boundaries DeltaNet|DeltaNet and DeltaNet|attention
     */
    static const char *const splits[] = {"cpu:1,cpu:2,cpu:1", "cpu:3,cpu:1", "cpu:2,cpu:2,cpu:0"};
    int32_t lens[4];
    same_bits("tiny-qwen35moe-bpe-q8_0.gguf", splits, 3, lens);
    /* both resumptions loaded a snapshot gathered over the stages (a multiple of the block) */
    assert_int_equal(lens[0], 48);
    assert_int_equal(lens[1], 32);
}

static void test_gemma3_window_global_boundary(void **state)
{
    /* layers 0, 1 window, 2 global, 3, 4 window, 5 global (pattern 3), window 32 in its own pool */
    static const char *const splits[] = {"cpu:2,cpu:4", "cpu:3,cpu:2,cpu:1"};
    int32_t lens[4];
    same_bits("tiny-gemma3-spm-q8_0.gguf", splits, 2, lens);
}

static void test_qwen3moe_two_stages(void **state)
{
    static const char *const splits[] = {"cpu:2,cpu:2", "cpu:1,cpu:1,cpu:2"};
    int32_t lens[4];
    same_bits("tiny-qwen3moe-bpe-q8_0.gguf", splits, 2, lens);
}

/* A stage allocates only for its layers: DeltaNet state on the DeltaNet stages alone. */
static void test_state_split_over_stages(void **state)
{
    struct hearth_model *whole = load("tiny-qwen35moe-bpe-q8_0.gguf", NULL);
    if (!whole) {
        print_message("skip: tiny-qwen35moe not found\n");
        skip();
    }
    struct hearth_model *m          = load("tiny-qwen35moe-bpe-q8_0.gguf", "cpu:1,cpu:2,cpu:1");
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 64;
    char err[HEARTH_ERR_MAX];
    struct hearth_context *cw, *cs;
    assert_int_equal(hearth_context_new(whole, &cp, &cw, err, sizeof err), HEARTH_OK);
    assert_int_equal(hearth_context_new(m, &cp, &cs, err, sizeof err), HEARTH_OK);
    assert_int_equal(cs->n_stage, 3);
    assert_true(cw->state_len > 0);
    assert_int_equal(cs->state_len, cw->state_len);
    /* one DeltaNet layer, then two, then the attention layer with none */
    assert_int_equal(cs->stages[1].state_len, 2 * cs->stages[0].state_len);
    assert_int_equal(cs->stages[2].state_len, 0);
    assert_int_equal(cs->stages[1].state_off, cs->stages[0].state_len);
    assert_true(cs->stages[0].embed && !cs->stages[0].output && cs->stages[2].output);
    hearth_context_free(cw);
    hearth_context_free(cs);
    hearth_model_free(whole);
    hearth_model_free(m);
}

/* What a stand-in device backend's kv_copy saw: the state it ran with and the copy. */
static struct {
    int n;
    void *state;
    int group;
    int32_t dst, src, n_rows;
} seen;

static void fake_kv_copy(struct hearth_context *ctx, int group, int32_t dst, int32_t src,
                         int32_t n_rows)
{
    seen.n++;
    seen.state  = ctx->be;
    seen.group  = group;
    seen.dst    = dst;
    seen.src    = src;
    seen.n_rows = n_rows;
}

/*
 * kv.c's copy hook reaches every stage that owns its K/V memory (kv_host
 * false), with that stage's state as ctx->be, and leaves the running stage
 * current; a kv_host stage is not asked.
 */
static void test_kv_copy_reaches_device_stages(void **state)
{
    struct backend dev    = *backend_cpu();
    dev.kv_host           = false;
    dev.kv_copy           = fake_kv_copy;
    struct hearth_model m = {.n_stage = 3};
    m.stage[0]            = (struct stage_place){.be = backend_cpu(), .l0 = 0, .l1 = 2};
    m.stage[1]            = (struct stage_place){.be = &dev, .device = 1, .l0 = 2, .l1 = 4};
    m.stage[2]            = (struct stage_place){.be = backend_cpu(), .l0 = 4, .l1 = 4};
    int states[3];
    struct stage stages[3];
    for (int i = 0; i < 3; i++)
        stages[i] = (struct stage){.place = &m.stage[i], .state = &states[i]};
    struct hearth_context ctx = {.model = &m, .n_stage = 3, .stages = stages};
    stage_enter(&ctx, 2);
    stages_kv_copy(&ctx, 1, 7, 3, 5);
    assert_int_equal(seen.n, 1);
    assert_ptr_equal(seen.state, &states[1]);
    assert_int_equal(seen.group, 1);
    assert_int_equal(seen.dst, 7);
    assert_int_equal(seen.src, 3);
    assert_int_equal(seen.n_rows, 5);
    assert_ptr_equal(ctx.st, &stages[2]);
    assert_ptr_equal(ctx.be, &states[2]);
}

/* Loads with p and expects st and a message containing want. */
static void refused(const struct hearth_model_params *p, enum hearth_status st, const char *want)
{
    const char *path = tu_model("stories260K.gguf");
    if (!path) {
        print_message("skip: stories260K.gguf not found\n");
        skip();
    }
    struct hearth_model *m   = (struct hearth_model *)1;
    char err[HEARTH_ERR_MAX] = "";
    assert_int_equal(hearth_model_load(path, p, &m, err, sizeof err), st);
    assert_null(m);
    print_message("refused: %s\n", err);
    assert_non_null(strstr(err, want));
}

static void test_bad_placements_are_refused(void **state)
{
    struct hearth_model_params p = hearth_model_default_params();
    static const struct {
        const char *split, *want;
    } cases[] = {
        {"cpu:2,cpu:2", "places 4 layers but the model has 5"},
        {"cpu:3,cpu:3", "places more than the model's 5 layers"},
        {"gpu:2,cpu:3", "names backend 'gpu'"},
        {"cpu1:2,cpu:3", "the CPU is one device"},
        {"cpu:2,", "ends with a comma"},
        {"cpu:2,,cpu:3", "is not BACKEND[DEVICE]:LAYERS"},
        {"cpu", "is not BACKEND[DEVICE]:LAYERS"},
        {"cpu:x", "needs a layer count"},
        {"cpu:-1,cpu:6", "needs a layer count"},
        {"cpu:99999999999", "needs a layer count"},
        {"cpu:6", "places more than the model's 5 layers"},
        {"cpu:0,cpu:5", "only the last"},
        {"cpu:0", "places no layer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p.layer_split = cases[i].split;
        refused(&p, HEARTH_EINVAL, cases[i].want);
    }
    /* a device this machine does not have, with or without Vulkan built */
    p.layer_split = "vulkan9:2,cpu:3";
    refused(&p, HEARTH_EUNSUPPORTED, "Vulkan device 9 cannot be used");
    p.layer_split  = NULL;
    p.n_gpu_layers = 99;
    p.devices      = "vulkan9";
    refused(&p, HEARTH_EUNSUPPORTED, "Vulkan device 9 cannot be used");
    p.devices      = NULL;
    p.n_gpu_layers = -1;
    refused(&p, HEARTH_EINVAL, "negative");
    p.n_gpu_layers = 2;
    p.layer_split  = "cpu:5";
    refused(&p, HEARTH_EINVAL, "without n_gpu_layers");
    p.layer_split  = NULL;
    p.n_gpu_layers = 0;
    p.devices      = "cuda0";
    refused(&p, HEARTH_EINVAL, "device 'cuda0'");
}

/*
 * Any layer_split string gives a placement that covers the layers in order,
 * or a refusal with a sentence: random strings over the syntax's alphabet.
 */
static void test_random_splits_place_or_refuse(void **state)
{
    static const char alphabet[] = "cpu:vulkan0123456789,-x ";
    struct hearth_model m        = {.hp = {.n_layer = 5}};
    struct hearth_model_params p = hearth_model_default_params();
    char split[24], err[HEARTH_ERR_MAX];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int placed   = 0;
    for (int i = 0; i < 20000; i++) {
        int len = (int)(rng >> 59) % 20;
        for (int j = 0; j < len; j++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            split[j] = alphabet[(rng >> 32) % (sizeof alphabet - 1)];
        }
        split[len] = 0;
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        /* every tenth a well-formed start, so placements that succeed are drawn too */
        if (i % 10 == 0)
            snprintf(split, sizeof split, "cpu:%d,cpu:%d", (int)(rng % 6), (int)(rng >> 8) % 6);
        p.layer_split         = split;
        err[0]                = 0;
        enum hearth_status st = model_place(&m, &p, err, sizeof err);
        if (st == HEARTH_OK) {
            placed++;
            assert_true(m.n_stage >= 1 && m.n_stage <= MODEL_MAX_STAGES);
            for (int32_t s = 0; s < m.n_stage; s++) {
                assert_int_equal(m.stage[s].l0, s ? m.stage[s - 1].l1 : 0);
                assert_true(m.stage[s].l1 > m.stage[s].l0 || (s > 0 && s == m.n_stage - 1));
            }
            assert_int_equal(m.stage[m.n_stage - 1].l1, 5);
        } else {
            assert_true(st == HEARTH_EINVAL || st == HEARTH_EUNSUPPORTED);
            assert_int_equal(m.n_stage, 0);
            assert_true(strlen(err) > 10);
        }
    }
    print_message("random splits: %d of 20000 placed\n", placed);
    assert_true(placed > 100);
}

/* -ngl N: the last N layers on the GPU, the output too only past n_layer (llama.cpp's rule). */
static void test_ngl_places_the_last_layers(void **state)
{
    static struct backend gpu; /* a stand-in: placement reads only its identity */
    const struct backend *cpu = backend_cpu();
    struct hearth_model m     = {.hp = {.n_layer = 5}};
    static const struct {
        int32_t ngl, n_stage, cpu_layers;
        bool out_on_gpu;
    } cases[] = {
        {0, 1, 5, false}, {2, 3, 3, false}, {5, 2, 0, false}, {6, 1, 0, true}, {99, 1, 0, true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct gpu_share one = {.be = &gpu, .device = 1, .share = 1};
        assert_int_equal(model_place_ngl(&m, cases[i].ngl, cpu, &one, 1), HEARTH_OK);
        assert_int_equal(m.n_stage, cases[i].n_stage);
        int32_t on_cpu = 0;
        for (int32_t s = 0; s < m.n_stage; s++) {
            if (m.stage[s].be == cpu)
                on_cpu += m.stage[s].l1 - m.stage[s].l0;
            else
                assert_int_equal(m.stage[s].device, 1);
            assert_int_equal(m.stage[s].l0, s ? m.stage[s - 1].l1 : 0);
        }
        assert_int_equal(m.stage[m.n_stage - 1].l1, 5);
        assert_int_equal(on_cpu, cases[i].cpu_layers);
        assert_int_equal(model_stage_of(&m, 5)->be == &gpu, cases[i].out_on_gpu);
        assert_ptr_equal(model_stage_of(&m, 4)->be, cases[i].ngl ? &gpu : cpu);
    }
}

/*
 * -ngl across GPUs: the offloaded layers in contiguous ranges in device
 * order, in proportion to the shares; a share that rounds to no layer gets
 * no stage; the output on the last GPU past the layer count.
 */
static void test_ngl_shares_across_gpus(void **state)
{
    static struct backend g0, g1, g2; /* stand-ins, told apart by identity */
    const struct backend *cpu = backend_cpu();
    struct hearth_model m     = {.hp = {.n_layer = 8}};
    static const struct {
        int32_t ngl;
        double share[3];
        int32_t n_gpu;
        int32_t want[3]; /* layers on each GPU */
        int32_t n_stage;
    } cases[] = {
        {8, {1, 1}, 2, {4, 4}, 3},  /* whole layers, output on the CPU */
        {99, {1, 1}, 2, {4, 4}, 2}, /* and the output on the last GPU */
        {8, {3, 1}, 2, {6, 2}, 3},
        {4, {1, 1}, 2, {2, 2}, 4}, /* the first 4 layers stay on the CPU */
        {8, {0, 1}, 2, {0, 8}, 2}, /* a zero share: no stage */
        {8, {1, 0}, 2, {8, 0}, 2},
        {5, {1, 1, 1}, 3, {2, 1, 2}, 5}, /* rounding: 1.67 -> 2, 3.33 -> 3, 5 */
        {2, {1, 1, 1}, 3, {1, 0, 1}, 4}, /* fewer layers than GPUs */
    };
    const struct backend *g[3] = {&g0, &g1, &g2};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gpu_share gpus[3];
        for (int d = 0; d < cases[i].n_gpu; d++)
            gpus[d] = (struct gpu_share){.be = g[d], .device = d, .share = cases[i].share[d]};
        assert_int_equal(model_place_ngl(&m, cases[i].ngl, cpu, gpus, cases[i].n_gpu), HEARTH_OK);
        int32_t got[3] = {0}, on_cpu = 0;
        for (int32_t s = 0; s < m.n_stage; s++) {
            const struct stage_place *p = &m.stage[s];
            assert_int_equal(p->l0, s ? m.stage[s - 1].l1 : 0);
            assert_true(p->l1 > p->l0 || s == m.n_stage - 1);
            if (p->be == cpu) {
                on_cpu += p->l1 - p->l0;
                continue;
            }
            assert_ptr_equal(p->be, g[p->device]);
            got[p->device] += p->l1 - p->l0;
            /* device order: a GPU's range starts after every earlier GPU's */
            for (int32_t t = 0; t < s; t++)
                if (m.stage[t].be != cpu)
                    assert_true(m.stage[t].device < p->device);
        }
        print_message("-ngl %d over %d GPUs: %d %d %d, %d on the CPU\n", cases[i].ngl,
                      cases[i].n_gpu, got[0], got[1], got[2], on_cpu);
        for (int d = 0; d < 3; d++)
            assert_int_equal(got[d], cases[i].want[d]);
        assert_int_equal(m.n_stage, cases[i].n_stage);
        assert_int_equal(m.stage[m.n_stage - 1].l1, 8);
        assert_int_equal(model_stage_of(&m, 8)->be != cpu, cases[i].ngl > 8);
    }
}

/* --device and --tensor-split that do not fit each other, or name no usable device. */
static void test_bad_devices_and_shares_are_refused(void **state)
{
    struct hearth_model_params p = hearth_model_default_params();
    p.n_gpu_layers               = 3;
    static const struct {
        const char *devices, *split, *want;
    } cases[] = {
        {NULL, "1:-1", "entry '-1' is negative"},
        {NULL, "-2", "entry '-2' is negative"},
        {NULL, "abc", "entry 'abc' is not a number"},
        {NULL, "1:", "has an entry that is not a number"},
        {NULL, "1:x2", "entry 'x2' is not a number"},
        {NULL, "nan", "entry 'nan' is not a number"},
        {NULL, "0", "gives every device a zero share"},
        {NULL, "inf", "entry 'inf' is not a number"},
        {"vulkan0,vulkan1", "1e308:1e308", "shares too large to add up"},
        {NULL, "0:0", "has 2 shares but 1 device is given"},
        {NULL, "3:1", "has 2 shares but 1 device is given"},
        {NULL, "3,1", "has 2 shares but 1 device is given"},
        {"vulkan0,vulkan0", NULL, "names vulkan0 twice"},
        {"vulkan0,cpu", NULL, "device 'cpu' is not a GPU"},
        {"vulkan0,", NULL, "device '' is not a GPU"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p.devices      = cases[i].devices;
        p.tensor_split = cases[i].split;
        /* checked before the devices are looked for: the same on a machine without them */
        refused(&p, HEARTH_EINVAL, cases[i].want);
    }
    /* a device past the machine's, by itself and in a list */
    p.tensor_split = "2:1";
    p.devices      = "vulkan7,vulkan0";
    refused(&p, HEARTH_EUNSUPPORTED, "Vulkan device 7 cannot be used");
    p.devices      = "vulkan7";
    p.tensor_split = NULL;
    refused(&p, HEARTH_EUNSUPPORTED, "Vulkan device 7 cannot be used");
    /* shares without offloaded layers, and with an explicit placement */
    p.devices      = NULL;
    p.n_gpu_layers = 0;
    p.tensor_split = "1";
    refused(&p, HEARTH_EINVAL, "n_gpu_layers is 0");
    p.layer_split = "cpu:5";
    refused(&p, HEARTH_EINVAL, "without n_gpu_layers, devices and tensor_split");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_two_and_three_stages),
        cmocka_unit_test(test_qwen35moe_deltanet_attention_boundary),
        cmocka_unit_test(test_gemma3_window_global_boundary),
        cmocka_unit_test(test_qwen3moe_two_stages),
        cmocka_unit_test(test_state_split_over_stages),
        cmocka_unit_test(test_kv_copy_reaches_device_stages),
        cmocka_unit_test(test_bad_placements_are_refused),
        cmocka_unit_test(test_random_splits_place_or_refuse),
        cmocka_unit_test(test_ngl_places_the_last_layers),
        cmocka_unit_test(test_ngl_shares_across_gpus),
        cmocka_unit_test(test_bad_devices_and_shares_are_refused),
    };
    return cmocka_run_group_tests_name("stages", tests, NULL, NULL);
}
