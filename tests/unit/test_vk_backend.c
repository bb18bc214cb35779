/*
 * test_vk_backend.c: the Vulkan backend (src/backend/vk/vk_backend.c)
 * against the CPU over whole models. Each dense shared model (the dense
 * hybrid qwen35 among them), and qwen3moe and qwen35moe converted to F32
 * (test_qwen3moe says why), runs one scenario (a chunked prompt, greedy steps, a second sequence
 * reusing the first's published prefix, a truncation inside a block it shares, which makes kv.c
 * copy the block on the device too, more steps) on the CPU, with every layer and the output on
 * vulkan0 (-ngl 99) and with the last half of the layers there (-ngl n/2: CPU, Vulkan, CPU output),
 * the device runs fed the CPU's greedy tokens so the rows stay comparable. Every logit row must
 * stay within a bound of the CPU's, relative to the row's largest |logit| (below). Then
 * stories260K's greedy text from greedy.tsv with -ngl 99, and the refusal of a device that does not
 * exist. (Every weight type the CPU runs has a shader, test_backend.c checks, and every layer kind
 * runs on Vulkan, so no shared model reaches those refusals.)
 *
 * Skips with a "vulkan-test: skipped" line when the build has no Vulkan or
 * the machine no device; .ci/run treats that line as a failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "hearth.h"
#include "model/memlaw.h"
#include "model/model.h"
#include "quant/quantize.h"
#include "util/engineutil.h"
#include "util/testutil.h"

enum { PROMPT = 40, STEPS = 8, TAIL = 10, MAX_REC = 2 * STEPS + 16 };

/*
 * The bounds, relative to a row's largest |logit|. The attention, SwiGLU
 * and norms differ from the CPU's by the device's exp and summation order
 * (each within 1e-5 of its scale, test_vk.c), and both round an F16
 * weight's activations to f16 (vk_act.c), where such a difference may
 * land on the other side of a 2^-11 step; compounded through the
 * residual stream over a few layers that is about 1e-3 (measured 2.3e-3
 * on tiny qwen2 f16): BOUND_FLOAT 5e-3. For quantized weights the steps
 * are 8-bit ones (Q8_0, Q8_K: 2^-7 of a block's largest value), which
 * the later layers carry: measured up to 3.6e-2 (tiny llama q6_k), and
 * argmax equal in most rows: BOUND_QUANT 6e-2. A wrong operation (a
 * missing bias or norm, a misplaced rope, a wrong K/V row) moves logits
 * by a good fraction of their range, and the float models hold the
 * tight bound.
 */
#define BOUND_FLOAT 5e-3
#define BOUND_QUANT 6e-2
/*
 * qwen3moe converted to F32 (test_qwen3moe): every matmul sums the same f32 products on both
 * backends, but a single-token step's attention on the CPU rounds q and its running output
 * to f16 (about 2.4e-3 per attention, test_vk.c), and the routed experts' outputs, which
 * dominate this random model's residual stream, carry that forward: measured 1.5e-2 on
 * decode rows, 1.4e-3 on prompt chunks. An expert chosen wrongly, a weight not renormalised
 * or a token's pairs mixed up moves a row by a good fraction of its range (a routing flip
 * between near-tied experts on the Q8_0 file: 0.58).
 */
#define BOUND_MOE 3e-2

static char why[256];

static bool have_vulkan(void)
{
    if (backend_vulkan(0, why, sizeof why))
        return true;
    print_message("vulkan-test: skipped: %s\n", why);
    return false;
}

struct record {
    float *logits; /* [MAX_REC][n_vocab] */
    int32_t n, n_vocab;
    hearth_token picks[MAX_REC]; /* the greedy tokens, in order */
    int32_t n_picks;
    const hearth_token *force; /* the reference's picks to take instead, or NULL */
    int32_t lens[2];
};

static void keep(struct record *r, const float *l)
{
    assert_non_null(l);
    assert_true(r->n < MAX_REC);
    memcpy(r->logits + (size_t)r->n++ * r->n_vocab, l, (size_t)r->n_vocab * sizeof(float));
}

static void tokens(hearth_token *t, int32_t n, int32_t salt, int32_t n_vocab)
{
    for (int32_t i = 0; i < n; i++)
        t[i] = 3 + (i * 7919 + salt * 104729) % (n_vocab - 3);
}

static void run(struct hearth_context *ctx, struct record *r, int32_t seq, const hearth_token *toks,
                int32_t n, int32_t chunk)
{
    char err[HEARTH_ERR_MAX];
    int32_t pos[64], sq[64];
    for (int32_t i = hearth_seq_len(ctx, seq); i < n; i += chunk) {
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

static void greedy(struct hearth_context *ctx, struct record *r, int32_t seq, hearth_token *toks,
                   int32_t *n_toks, int32_t steps)
{
    for (int32_t i = 0; i < steps; i++) {
        hearth_token t         = r->force
                                     ? r->force[r->n_picks]
                                     : tu_argmax(r->logits + (size_t)(r->n - 1) * r->n_vocab, r->n_vocab);
        r->picks[r->n_picks++] = t;
        toks[(*n_toks)++]      = t;
        run(ctx, r, seq, toks, *n_toks, 1);
    }
}

static void scenario(struct hearth_model *model, struct record *r)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 128;
    cp.n_seq_max                    = 2;
    cp.n_batch                      = 32;
    cp.kv_block                     = 16;
    char err[HEARTH_ERR_MAX];
    struct hearth_context *ctx;
    if (hearth_context_new(model, &cp, &ctx, err, sizeof err) != HEARTH_OK)
        fail_msg("context: %s", err);
    r->n_vocab = hearth_model_n_vocab(model);
    r->n = r->n_picks = 0;
    hearth_token a[PROMPT + 2 * STEPS + 16], b[PROMPT + STEPS];
    int32_t n_a = PROMPT;
    tokens(a, PROMPT, 1, r->n_vocab);
    run(ctx, r, 0, a, PROMPT, 32);
    greedy(ctx, r, 0, a, &n_a, STEPS);
    /* a second sequence shares the first's first blocks, then goes its own way */
    memcpy(b, a, (PROMPT - TAIL) * sizeof *b);
    tokens(b + PROMPT - TAIL, TAIL, 2, r->n_vocab);
    r->lens[0] = hearth_seq_reuse_prefix(ctx, 1, b, PROMPT);
    run(ctx, r, 1, b, PROMPT, 32);
    /* a cut inside the block the second sequence shares: the block is copied first */
    hearth_seq_truncate(ctx, 0, 10);
    r->lens[1] = hearth_seq_len(ctx, 0);
    n_a        = r->lens[1];
    tokens(a + n_a, 12, 3, r->n_vocab);
    n_a += 12;
    run(ctx, r, 0, a, n_a, 5);
    greedy(ctx, r, 0, a, &n_a, STEPS / 2);
    int32_t n_b = PROMPT;
    greedy(ctx, r, 1, b, &n_b, STEPS / 2);
    hearth_context_free(ctx);
}

/* name: a shared model's file name, or a path. */
static struct hearth_model *load(const char *name, int32_t ngl, const char *split)
{
    const char *path = name[0] == '/' ? name : tu_model(name);
    if (!path)
        return NULL;
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 2;
    mp.n_gpu_layers               = ngl;
    mp.layer_split                = split;
    struct hearth_model *m;
    char err[HEARTH_ERR_MAX];
    if (hearth_model_load(path, &mp, &m, err, sizeof err) != HEARTH_OK)
        fail_msg("%s with -ngl %d: %s", name, ngl, err);
    return m;
}

/* Runs name on the CPU, with -ngl 99 and with -ngl n_layer / 2; every row within BOUND. */
static void near_cpu(const char *name, double bound)
{
    if (!have_vulkan())
        skip();
    struct hearth_model *cpu = load(name, 0, NULL);
    if (!cpu) {
        print_message("skip: %s not found\n", name);
        skip();
    }
    const int32_t n_layer = cpu->hp.n_layer;
    /* a recurrent state cut inside a block resumes from the snapshot below the cut: here 0 */
    const int32_t cut_to = cpu->hp.recurrent ? 0 : 10;
    /* the second sequence shares PROMPT - TAIL tokens: a whole block and the head of the next,
     * copied; a recurrent state resumes at whole blocks only */
    const int32_t reuse_to = cpu->hp.recurrent ? 16 : PROMPT - TAIL;
    struct record ref = {0}, got = {0};
    const size_t len = (size_t)MAX_REC * hearth_model_n_vocab(cpu) * sizeof(float);
    ref.logits       = malloc(len);
    got.logits       = malloc(len);
    assert_non_null(ref.logits);
    assert_non_null(got.logits);
    scenario(cpu, &ref);
    hearth_model_free(cpu);
    const int32_t ngls[2] = {99, n_layer / 2};
    for (int i = 0; i < 2; i++) {
        struct hearth_model *m = load(name, ngls[i], NULL);
        /* -ngl 99: one Vulkan stage; n/2: CPU layers, Vulkan layers, the CPU's output */
        assert_int_equal(m->n_stage, i == 0 ? 1 : 3);
        assert_string_equal(m->stage[i == 0 ? 0 : 1].be->name, "vulkan");
        got.force = ref.picks;
        scenario(m, &got);
        hearth_model_free(m);
        assert_int_equal(got.n, ref.n);
        assert_memory_equal(got.lens, ref.lens, sizeof ref.lens);
        double worst = 0;
        int agree    = 0;
        for (int32_t r = 0; r < ref.n; r++) {
            const float *a = ref.logits + (size_t)r * ref.n_vocab,
                        *b = got.logits + (size_t)r * ref.n_vocab;
            double scale = 0, diff = 0;
            for (int32_t j = 0; j < ref.n_vocab; j++) {
                scale = fmax(scale, fabs(a[j]));
                diff  = fmax(diff, fabs((double)a[j] - b[j]));
            }
            assert_false(isnan(diff));
            worst = fmax(worst, diff / scale);
            agree += tu_argmax(a, ref.n_vocab) == tu_argmax(b, ref.n_vocab);
        }
        print_message("%s -ngl %d: %d rows, worst |diff| / max|logit| %.2e (bound %.0e), "
                      "argmax equal in %d; reuse %d, cut to %d\n",
                      name, ngls[i], ref.n, worst, bound, agree, got.lens[0], got.lens[1]);
        assert_true(worst <= bound);
    }
    /* the scenario exercised what it means to: a reused prefix (into a block) and a cut
     * inside a block */
    assert_int_equal(ref.lens[0], reuse_to);
    assert_int_equal(ref.lens[1], cut_to);
    free(ref.logits);
    free(got.logits);
}

static void test_stories260k(void **state)
{
    near_cpu("stories260K.gguf", BOUND_FLOAT);
}
static void test_llama_f16(void **state)
{
    near_cpu("tiny-llama-spm-f16.gguf", BOUND_FLOAT);
}
static void test_llama_q4_0(void **state)
{
    near_cpu("tiny-llama-spm-q4_0.gguf", BOUND_QUANT);
}
static void test_llama_q4_k_m(void **state)
{
    near_cpu("tiny-llama-spm-q4_k_m.gguf", BOUND_QUANT);
}
static void test_llama_q6_k(void **state)
{
    near_cpu("tiny-llama-spm-q6_k.gguf", BOUND_QUANT);
}
/* f16 holds its biases to the tight bound */
static void test_qwen2_f16(void **state)
{
    near_cpu("tiny-qwen2-bpe-f16.gguf", BOUND_FLOAT);
}
static void test_qwen2_q8_0(void **state)
{
    near_cpu("tiny-qwen2-bpe-q8_0.gguf", BOUND_QUANT);
}
static void test_qwen3(void **state)
{
    near_cpu("tiny-qwen3-bpe-q8_0.gguf", BOUND_QUANT);
}
static void test_gemma3(void **state)
{
    near_cpu("tiny-gemma3-spm-q8_0.gguf", BOUND_QUANT);
}
/* near_cpu on the shared model name converted to F32 (see test_qwen3moe). */
static void near_cpu_f32(const char *name, double bound)
{
    if (!have_vulkan())
        skip();
    const char *q8 = tu_model(name);
    if (!q8) {
        print_message("skip: %s not found\n", name);
        skip();
    }
    char *dir = tu_tmpdir(), path[4096], err[HEARTH_ERR_MAX];
    assert_non_null(dir);
    snprintf(path, sizeof path, "%s/f32.gguf", dir);
    const struct quant_params qp = {.n_threads = 2, .allow_requantize = true};
    if (quant_file(q8, path, quant_preset_find("F32"), &qp, err, sizeof err) != HEARTH_OK)
        fail_msg("quantize: %s", err);
    near_cpu(path, bound);
    tu_rmtree(dir);
    free(dir);
}

/*
 * qwen3moe's routed experts. The CPU rounds the activations of the file's Q8_0 matmuls, and
 * the device now rounds them alike (vk_act.c), but attention, norms and summation orders
 * still differ in the last bits, and a token whose router sees two experts that close picks
 * the other one on the device: its row, and every later row of its sequence, then move by a
 * good fraction of the logits' range (measured 0.58 and 0.19 of the largest |logit| on two of
 * the scenario's 19 rows of the Q8_0 file, the others within 5.7e-2). So the logits are held
 * to BOUND_MOE on the model converted to F32, where both backends sum the same f32 products
 * and no routing is that close; tests/e2e/test_perplexity.c holds the Q8_0 file's figure
 * within 0.5% of the CPU's.
 */
static void test_qwen3moe(void **state)
{
    near_cpu_f32("tiny-qwen3moe-bpe-q8_0.gguf", BOUND_MOE);
}

/*
 * qwen35moe: Gated DeltaNet layers (their recurrent state on the device, snapshots saved
 * mid-batch and loaded when the second sequence reuses the first's prefix, a cut that
 * resumes from 0), gated attention with IMRoPE, and the same routed experts, so the same
 * reason to convert it to F32: measured 1.4e-4 on every row, argmax equal in all 19 (the
 * Q8_0 file: 1.1e-2, one row's argmax differs).
 */
static void test_qwen35moe(void **state)
{
    near_cpu_f32("tiny-qwen35moe-bpe-q8_0.gguf", BOUND_MOE);
}

/*
 * qwen35: qwen35moe's mixers with a dense SwiGLU FFN, so no router to flip on a near tie:
 * the Q8_0 file as it is, held to the quantized bound (measured 1.0e-2 with -ngl 99, 9.1e-3
 * with -ngl 2, argmax equal in 17 of 19 rows).
 */
static void test_qwen35(void **state)
{
    near_cpu("tiny-qwen35-bpe-q8_0.gguf", BOUND_QUANT);
}

/*
 * The memory law on the device: what each Vulkan stage allocated for a
 * context (hearth_context_stage), counted as ctx_init, vk_deltanet.c and
 * vk_moe.c allocated it, equals memlaw_context's prediction from the header
 * alone, kind by kind, for -ngl 99 and the half split, over contexts that
 * differ in length, sequences and micro-batch. Every shared model, the
 * Q8_0 MoE files as they are (memory does not depend on the weights' type).
 */
static void test_memory_law(void **state)
{
    if (!have_vulkan())
        return;
    static const char *const files[] = {
        "stories260K.gguf",
        "tiny-llama-spm-q4_0.gguf",
        "tiny-qwen2-bpe-q8_0.gguf",
        "tiny-qwen3-bpe-q8_0.gguf",
        "tiny-gemma3-spm-q8_0.gguf",
        "tiny-qwen3moe-bpe-q8_0.gguf",
        "tiny-qwen35moe-bpe-q8_0.gguf",
        "tiny-qwen35-bpe-q8_0.gguf",
    };
    static const int32_t ctxs[] = {256, 2048}, seqs[] = {1, 4}, batches[] = {32, 512};
    int checked = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        const char *path = tu_model(files[f]);
        if (!path)
            continue;
        char err[HEARTH_ERR_MAX];
        struct hearth_model *d;
        assert_int_equal(model_describe(path, false, &d, err, sizeof err), HEARTH_OK);
        for (int split = 0; split < 2; split++) {
            struct hearth_model_params mp = hearth_model_default_params();
            mp.n_threads                  = 2;
            mp.n_gpu_layers               = split ? d->hp.n_layer / 2 : 99;
            struct hearth_model *m;
            if (hearth_model_load(path, &mp, &m, err, sizeof err) != HEARTH_OK)
                fail_msg("%s: %s", files[f], err);
            struct memlaw_stage st[MODEL_MAX_STAGES];
            const int32_t n_stage = memlaw_stages_of(m, false, st);
            for (size_t i = 0; i < 8; i++) {
                struct hearth_context_params cp = hearth_context_default_params();
                cp.n_ctx                        = ctxs[i & 1];
                cp.n_seq_max                    = seqs[(i >> 1) & 1];
                cp.n_batch                      = batches[(i >> 2) & 1];
                struct hearth_context *ctx;
                if (hearth_context_new(m, &cp, &ctx, err, sizeof err) != HEARTH_OK)
                    fail_msg("%s: context: %s", files[f], err);
                struct mem_acct dev[MODEL_MAX_STAGES], host;
                memlaw_context(d, &cp, st, n_stage, dev, &host);
                assert_int_equal(hearth_context_n_stages(ctx), n_stage);
                for (int32_t k = 0; k < n_stage; k++) {
                    struct hearth_stage_info si;
                    assert_true(hearth_context_stage(ctx, k, &si));
                    if (backend_law_of(st[k].kind)->host)
                        continue;
                    const uint64_t got[MEM_KINDS] = {si.memory.weights, si.memory.kv,
                                                     si.memory.compute, si.memory.output,
                                                     si.memory.other};
                    for (int kind = 0; kind < MEM_KINDS; kind++)
                        if (got[kind] != dev[k].b[kind])
                            fail_msg("%s -ngl %d -c %d -np %d -b %d, stage %d, kind %d: counted "
                                     "%llu, predicted %llu",
                                     files[f], mp.n_gpu_layers, cp.n_ctx, cp.n_seq_max, cp.n_batch,
                                     k, kind, (unsigned long long)got[kind],
                                     (unsigned long long)dev[k].b[kind]);
                    checked++;
                }
                hearth_context_free(ctx);
            }
            hearth_model_free(m);
        }
        hearth_model_free(d);
    }
    print_message("%d Vulkan stages held to the memory law\n", checked);
    if (!checked)
        skip();
}

/* The continuation greedy.tsv gives for prompt, generated from hearth's own loop. */
static char *generate(struct hearth_model *m, const char *prompt, int n)
{
    char err[HEARTH_ERR_MAX];
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 256;
    struct hearth_context *ctx;
    if (hearth_context_new(m, &cp, &ctx, err, sizeof err) != HEARTH_OK)
        fail_msg("context: %s", err);
    hearth_token *ids = NULL;
    size_t n_ids      = 0;
    assert_int_equal(
        hearth_tokenize(m, prompt, strlen(prompt), true, false, &ids, &n_ids, err, sizeof err),
        HEARTH_OK);
    hearth_token toks[256];
    memcpy(toks, ids, n_ids * sizeof *ids);
    free(ids);
    int32_t n_tok = (int32_t)n_ids, pos[256], seq[256] = {0};
    for (int32_t i = 0; i < 256; i++)
        pos[i] = i;
    char *out  = calloc(1, 4096);
    size_t len = 0;
    assert_non_null(out);
    struct hearth_batch b = {n_tok, toks, pos, seq, NULL};
    for (int i = 0; i < n; i++) {
        if (hearth_decode(ctx, &b, err, sizeof err) != HEARTH_OK)
            fail_msg("decode: %s", err);
        const hearth_token t = tu_argmax(hearth_get_logits(ctx, b.n - 1), hearth_model_n_vocab(m));
        if (hearth_token_is_eog(m, t))
            break;
        len += hearth_token_to_piece(m, t, out + len, 4095 - len);
        toks[n_tok] = t;
        b           = (struct hearth_batch){1, &toks[n_tok], &pos[n_tok], seq, NULL};
        n_tok++;
    }
    out[len] = 0;
    hearth_context_free(ctx);
    return out;
}

/* greedy.tsv's stories260K rows: the text with every layer on vulkan0 is the CPU's, byte for byte.
 */
static void test_stories260k_greedy_text(void **state)
{
    if (!have_vulkan())
        skip();
    TU_SHARED_OR_SKIP(tsv, "reference/greedy.tsv");
    char *text = tu_read_file(tsv, NULL);
    assert_non_null(text);
    struct hearth_model *cpu = load("stories260K.gguf", 0, NULL),
                        *dev = load("stories260K.gguf", 99, NULL);
    assert_non_null(cpu);
    int rows   = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4], *s2 = NULL;
        f[0] = strtok_r(line, "\t", &s2);
        for (int i = 1; i < 4; i++)
            f[i] = strtok_r(NULL, i == 3 ? "" : "\t", &s2);
        if (line[0] == '#' || !f[3] || strcmp(f[0], "stories260K.gguf"))
            continue;
        tu_unescape(f[3]);
        char *a = generate(cpu, f[1], atoi(f[2])), *b = generate(dev, f[1], atoi(f[2]));
        print_message("\"%s\": %s\n", f[1], b);
        assert_string_equal(a, f[3]);
        assert_string_equal(b, a);
        free(a);
        free(b);
        rows++;
    }
    assert_true(rows >= 4);
    hearth_model_free(cpu);
    hearth_model_free(dev);
    free(text);
}

/* Loads name with p and expects st and a message containing want. */
static void refused(const char *name, int32_t ngl, const char *split, enum hearth_status want_st,
                    const char *want)
{
    const char *path = tu_model(name);
    if (!path) {
        print_message("skip: %s not found\n", name);
        skip();
    }
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_gpu_layers               = ngl;
    mp.layer_split                = split;
    struct hearth_model *m        = NULL;
    char err[HEARTH_ERR_MAX]      = "";
    assert_int_equal(hearth_model_load(path, &mp, &m, err, sizeof err), want_st);
    assert_null(m);
    print_message("%s: %s\n", name, err);
    assert_non_null(strstr(err, want));
}

static void test_refusals(void **state)
{
    if (!have_vulkan())
        skip();
    refused("stories260K.gguf", 0, "vulkan7:5", HEARTH_EUNSUPPORTED,
            "Vulkan device 7 cannot be used: this machine offers");
}

int main(void)
{
    /* clang-format off */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_llama_f16),
        cmocka_unit_test(test_llama_q4_0),
        cmocka_unit_test(test_llama_q4_k_m),
        cmocka_unit_test(test_llama_q6_k),
        cmocka_unit_test(test_qwen2_f16),
        cmocka_unit_test(test_qwen2_q8_0),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_qwen3moe),
        cmocka_unit_test(test_qwen35moe),
        cmocka_unit_test(test_qwen35),
        cmocka_unit_test(test_memory_law),
        cmocka_unit_test(test_stories260k_greedy_text),
        cmocka_unit_test(test_refusals),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
