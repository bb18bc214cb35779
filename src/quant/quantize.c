/*
 * quantize.c: a GGUF model to a quantization preset, as llama-quantize does
 * it without an importance matrix (see quantize.h).
 *
 * The per-tensor rules are llama.cpp's (src/llama-quant.cpp,
 * llama_tensor_get_type) for the presets offered here; rules that only
 * concern the IQ1/IQ2/IQ3/TQ/MXFP4 presets are left out with them. The
 * counters those rules use (i-th attn_v, i-th ffn_down) advance in
 * llama.cpp's processing order, which is also the output order.
 *
 * Data flows per tensor in chunks of rows (at most CHUNK_FLOATS values):
 * input rows to f32 (dequantized if needed), checked finite, quantized row by
 * row on the thread pool, appended to the writer. Memory stays at two chunk
 * buffers whatever the model size.
 */
#include "quant/quantize.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf/writer.h"
#include "kernels/kernels.h"
#include "quant/quants.h"
#include "util/clock.h"
#include "util/errfmt.h"
#include "util/threadpool.h"

#define CHUNK_FLOATS (8 << 20) /* f32 values converted and quantized per step (32 MiB) */
#define QNT_VERSION  2u /* general.quantization_version llama.cpp writes (GGML_QNT_VERSION) */

/* llama.cpp's LLAMA_FTYPE values, as general.file_type stores them. */
enum {
    FT_F32       = 0,
    FT_F16       = 1,
    FT_Q4_0      = 2,
    FT_Q4_1      = 3,
    FT_Q8_0      = 7,
    FT_Q5_0      = 8,
    FT_Q5_1      = 9,
    FT_Q2_K      = 10,
    FT_Q3_K_S    = 11,
    FT_Q3_K_M    = 12,
    FT_Q3_K_L    = 13,
    FT_Q4_K_S    = 14,
    FT_Q4_K_M    = 15,
    FT_Q5_K_S    = 16,
    FT_Q5_K_M    = 17,
    FT_Q6_K      = 18,
    FT_IQ4_NL    = 25,
    FT_IQ4_XS    = 30,
    FT_BF16      = 32,
    FT_TQ1_0     = 36,
    FT_TQ2_0     = 37,
    FT_MXFP4_MOE = 38,
};

/* clang-format off */
static const struct quant_preset presets[] = {
    {"Q4_0",   FT_Q4_0,   DTYPE_Q4_0,   "4.5 bpw, symmetric 4-bit blocks of 32"},
    {"Q4_1",   FT_Q4_1,   DTYPE_Q4_1,   "5.0 bpw, 4-bit with a minimum per block of 32"},
    {"Q5_0",   FT_Q5_0,   DTYPE_Q5_0,   "5.5 bpw, symmetric 5-bit blocks of 32"},
    {"Q5_1",   FT_Q5_1,   DTYPE_Q5_1,   "6.0 bpw, 5-bit with a minimum per block of 32"},
    {"Q8_0",   FT_Q8_0,   DTYPE_Q8_0,   "8.5 bpw, nearly lossless"},
    {"Q2_K",   FT_Q2_K,   DTYPE_Q2_K,   "~3.0 bpw mix of Q2_K/Q3_K/Q4_K"},
    {"Q3_K_S", FT_Q3_K_S, DTYPE_Q3_K,   "~3.5 bpw, Q3_K throughout"},
    {"Q3_K_M", FT_Q3_K_M, DTYPE_Q3_K,   "~3.9 bpw, Q3_K with Q4_K/Q5_K where it matters"},
    {"Q3_K_L", FT_Q3_K_L, DTYPE_Q3_K,   "~4.3 bpw, Q3_K with Q5_K attn_v and ffn_down"},
    {"Q4_K_S", FT_Q4_K_S, DTYPE_Q4_K,   "~4.6 bpw, Q4_K with Q5_K in the first layers"},
    {"Q4_K_M", FT_Q4_K_M, DTYPE_Q4_K,   "~4.9 bpw, Q4_K with Q6_K attn_v/ffn_down in some layers"},
    {"Q5_K_S", FT_Q5_K_S, DTYPE_Q5_K,   "~5.5 bpw, Q5_K throughout"},
    {"Q5_K_M", FT_Q5_K_M, DTYPE_Q5_K,   "~5.7 bpw, Q5_K with Q6_K attn_v/ffn_down in some layers"},
    {"Q6_K",   FT_Q6_K,   DTYPE_Q6_K,   "~6.6 bpw"},
    {"IQ4_NL", FT_IQ4_NL, DTYPE_IQ4_NL, "4.5 bpw, non-linear 4-bit blocks of 32"},
    {"IQ4_XS", FT_IQ4_XS, DTYPE_IQ4_XS, "4.25 bpw, non-linear 4-bit super-blocks of 256"},
    {"TQ1_0",  FT_TQ1_0,  DTYPE_TQ1_0,  "1.69 bpw ternary (-d, 0, d), for ternary-trained models"},
    {"TQ2_0",  FT_TQ2_0,  DTYPE_TQ2_0,  "2.06 bpw ternary, 2 bits a weight"},
    {"MXFP4_MOE", FT_MXFP4_MOE, DTYPE_MXFP4, "MXFP4 MoE experts, Q8_0 elsewhere"},
    {"F16",    FT_F16,    DTYPE_F16,    "16 bpw half precision"},
    {"BF16",   FT_BF16,   DTYPE_BF16,   "16 bpw bfloat16"},
    {"F32",    FT_F32,    DTYPE_F32,    "32 bpw, no quantization"},
};
/* clang-format on */

const struct quant_preset *quant_presets(int *n)
{
    *n = (int)(sizeof presets / sizeof presets[0]);
    return presets;
}

const char *quant_preset_refusal(const char *name)
{
    /* llama-quantize's tensor_requires_imatrix: it stops without --imatrix for these targets */
    static const char *const imatrix[] = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS",
                                          "IQ2_S", "IQ2_M", "IQ3_XXS"};
    static const char *const iq3[]     = {"IQ3_XS", "IQ3_S", "IQ3_M"};
    for (size_t i = 0; i < sizeof imatrix / sizeof imatrix[0]; i++)
        if (!strcasecmp(name, imatrix[i]))
            return "llama.cpp's quantizer makes it only from an importance matrix "
                   "(llama-quantize --imatrix), and hearth quantize takes none; quantize it with "
                   "llama.cpp: hearth runs the file";
    for (size_t i = 0; i < sizeof iq3 / sizeof iq3[0]; i++)
        if (!strcasecmp(name, iq3[i]))
            return "hearth's IQ3_S quantizer is not written yet (llama.cpp makes it without an "
                   "importance matrix); quantize it with llama.cpp: hearth runs the file";
    return NULL;
}

const struct quant_preset *quant_preset_find(const char *name)
{
    static const struct {
        const char *alias, *name;
    } aliases[] = {{"Q3_K", "Q3_K_M"}, {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].alias))
            name = aliases[i].name;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcasecmp(name, presets[i].name))
            return &presets[i];
    return NULL;
}

/* ------------------------------------------------------------ the plan --- */

/* llama.cpp's tensor categories (tensor_get_category), by name substring. */
enum cat {
    CAT_TOKEN_EMBD,
    CAT_ATTN_Q,
    CAT_ATTN_V,
    CAT_ATTN_K,
    CAT_ATTN_QKV,
    CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT,
    CAT_FFN_UP,
    CAT_FFN_GATE,
    CAT_FFN_DOWN,
    CAT_OUTPUT,
    CAT_OTHER
};

static enum cat category(const char *name)
{
    if (!strcmp(name, "output.weight"))
        return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
        return CAT_TOKEN_EMBD;
    static const struct {
        const char *sub;
        enum cat c;
    } subs[] = {
        {"attn_qkv.weight", CAT_ATTN_QKV},
        {"attn_kv_b.weight", CAT_ATTN_KV_B},
        {"attn_v.weight", CAT_ATTN_V},
        {"attn_k.weight", CAT_ATTN_K},
        {"attn_q.weight", CAT_ATTN_Q},
        {"attn_output.weight", CAT_ATTN_OUTPUT},
        {"ffn_up", CAT_FFN_UP},
        {"ffn_gate", CAT_FFN_GATE},
        {"ffn_down", CAT_FFN_DOWN},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strstr(name, subs[i].sub))
            return subs[i].c;
    return CAT_OTHER;
}

/* Dimensions as ggml counts them: trailing 1s do not count (ggml_n_dims). */
static int n_dims_of(const struct gguf_tensor *t)
{
    int n = 1;
    for (int d = 1; d < GGUF_MAX_DIMS; d++)
        if (t->ne[d] > 1)
            n = d + 1;
    return n;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Whether llama.cpp quantizes this tensor at all (tensor_allows_quantization). */
static bool allows_quantization(const struct gguf_tensor *t)
{
    if (n_dims_of(t) < 2)
        return false;
    const char *name = t->name;
    /* llama.cpp tests rfind("weight") == size - 6, i.e. the name ends with it. */
    if (!ends_with(name, "weight"))
        return false;
    static const char *const never[] = {
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strstr(name, never[i]))
            return false;
    return strcmp(name, "position_embd.weight") && strcmp(name, "token_types.weight");
}

/* The N of a name "blk.N...." as sscanf("blk.%d.") reads it; false when there is none. */
static bool parse_layer(const char *name, int *out)
{
    if (strncmp(name, "blk.", 4))
        return false;
    char *end;
    long v = strtol(name + 4, &end, 10);
    if (end == name + 4 || v < -2147483647L || v > 2147483647L)
        return false;
    *out = (int)v;
    return true;
}

/* Layer of a tensor for the output order, -1 for non-layer tensors (weight_name_comparer). */
static int layer_of(const char *name)
{
    int l = -1;
    parse_layer(name, &l);
    return l;
}

/* What the rules need to know of the model (llama.cpp's hparams). */
struct model_info {
    int n_layer;        /* <arch>.block_count; 0 when absent (only the FFN rules need it) */
    char layer_key[96]; /* "<arch>.block_count", for the message when it is missing */
    uint32_t n_gqa;     /* head_count / head_count_kv of layer 0; 0 when head_count_kv is 0 */
    uint32_t n_expert;  /* <arch>.expert_count, 0 when absent */
    bool falcon;        /* general.architecture is falcon */
    bool is_70b;        /* llama.cpp's LLM_TYPE_70B, which gives attn_v more bits */
};

/* Key as u32, or element 0 of a u32/i32 per-layer array. */
static bool get_u32_or_first(const struct gguf_file *f, const char *key, uint32_t *out)
{
    if (gguf_get_u32(f, key, out))
        return true;
    int64_t i = gguf_find_key(f, key);
    enum gguf_vtype et;
    uint64_t n;
    if (i < 0 || !gguf_kv_arr(f, i, &et, &n) || !n || (et != GGUF_U32 && et != GGUF_I32))
        return false;
    memcpy(out, gguf_arr_data(f, i), 4);
    return true;
}

static void model_info_read(const struct gguf_file *f, struct model_info *mi)
{
    char arch[64], key[128];
    memset(mi, 0, sizeof *mi);
    if (!gguf_get_str(f, "general.architecture", arch, sizeof arch))
        strcpy(arch, "(no general.architecture)");
    uint32_t u = 0, n_head = 0, n_head_kv = 0;
    snprintf(mi->layer_key, sizeof mi->layer_key, "%s.block_count", arch);
    if (gguf_get_u32(f, mi->layer_key, &u) && u > 0 && u <= 4096)
        mi->n_layer = (int)u;
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    get_u32_or_first(f, key, &n_head);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    if (!get_u32_or_first(f, key, &n_head_kv))
        n_head_kv = n_head;
    mi->n_gqa = n_head_kv ? n_head / n_head_kv : 0;
    snprintf(key, sizeof key, "%s.expert_count", arch);
    gguf_get_u32(f, key, &mi->n_expert);
    mi->falcon = !strcmp(arch, "falcon");
    if (!strcmp(arch, "llama"))
        mi->is_70b = mi->n_expert != 8 && mi->n_layer == 80 && n_head != n_head_kv;
    else if (!strcmp(arch, "qwen2") || !strcmp(arch, "deci") || !strcmp(arch, "olmo"))
        mi->is_70b = mi->n_layer == 80;
    else if (!strcmp(arch, "jais2"))
        mi->is_70b = mi->n_layer == 68;
}

/* The running state of llama.cpp's quantize_state_impl. */
struct rules {
    const struct model_info *mi;
    uint32_t ft; /* preset ftype */
    int n_attn_v, i_attn_v;
    int i_ffn_down, i_ffn_gate, i_ffn_up;
    bool tied_embeddings; /* no output.weight: token_embd doubles as the output */
};

static bool more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* Layer of an FFN tensor: the counter for dense models, the name for MoE (layer_info). */
static enum hearth_status ffn_layer(const struct rules *r, int counter, const char *name, int *out,
                                    char *err, size_t err_len)
{
    *out = counter;
    if (r->mi->n_layer == 0)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "quantize: the rules for %s need the layer count, and the file has no valid %s",
                    name, r->mi->layer_key);
    if (r->mi->n_expert > 1) {
        int l = -1;
        if (!parse_layer(name, &l))
            return fail(HEARTH_EFORMAT, err, err_len,
                        "quantize: cannot tell the layer of tensor %s", name);
        if (l < 0 || l >= r->mi->n_layer)
            return fail(HEARTH_EFORMAT, err, err_len,
                        "quantize: tensor %s is in layer %d, outside 0..%d", name, l,
                        r->mi->n_layer - 1);
        *out = l;
    }
    return HEARTH_OK;
}

/* llama_tensor_get_type_impl for the offered presets: the type for a quantizable tensor. */
static enum hearth_status rule_type(struct rules *r, const struct gguf_tensor *t, enum dtype base,
                                    enum dtype *out, char *err, size_t err_len)
{
    const struct model_info *mi = r->mi;
    const uint32_t ft           = r->ft;
    const enum cat c            = category(t->name);
    enum dtype ty               = base;
    enum hearth_status st;
    int il, nl = mi->n_layer;

    if (c == CAT_OUTPUT || (r->tied_embeddings && c == CAT_TOKEN_EMBD)) {
        if (ft == FT_MXFP4_MOE || mi->falcon || t->ne[0] % dtype_get(ty)->block)
            ty = DTYPE_Q8_0;
        else if (ty != DTYPE_Q8_0)
            ty = DTYPE_Q6_K;
    } else if (ft == FT_MXFP4_MOE) {
        /* experts (3-D, one matrix per expert) in MXFP4, every other matrix in Q8_0 */
        ty = t->ne[2] > 1 ? DTYPE_MXFP4 : DTYPE_Q8_0;
    } else if (c == CAT_TOKEN_EMBD) {
        /* of the offered presets only TQ1_0/TQ2_0 change it */
        if (ft == FT_TQ1_0 || ft == FT_TQ2_0)
            ty = DTYPE_Q4_K;
    } else if (c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B) {
        const int i = r->i_attn_v, n = r->n_attn_v;
        if (ft == FT_Q2_K)
            ty = mi->n_gqa >= 4 ? DTYPE_Q4_K : DTYPE_Q3_K;
        else if (ft == FT_Q3_K_M)
            ty = i < 2 ? DTYPE_Q5_K : DTYPE_Q4_K;
        else if (ft == FT_Q3_K_L)
            ty = DTYPE_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && mi->n_gqa >= 4)
            ty = DTYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && more_bits(i, n))
            ty = DTYPE_Q6_K;
        else if (ft == FT_Q4_K_S && i < 4)
            ty = DTYPE_Q5_K;
        /* 70B: attn_v is 8x smaller than attn_q (8 heads share it), extra bits are cheap */
        if (mi->is_70b && (ty == DTYPE_Q3_K || ty == DTYPE_Q4_K))
            ty = DTYPE_Q5_K;
        if (mi->n_expert == 8)
            ty = DTYPE_Q8_0;
        r->i_attn_v++;
    } else if (c == CAT_ATTN_K) {
        if (mi->n_expert == 8)
            ty = DTYPE_Q8_0;
    } else if (c == CAT_FFN_DOWN) {
        if ((st = ffn_layer(r, r->i_ffn_down, t->name, &il, err, err_len)))
            return st;
        if (ft == FT_Q2_K)
            ty = DTYPE_Q3_K;
        else if (ft == FT_Q3_K_M)
            ty = il < nl / 16                       ? DTYPE_Q5_K
                 : !mi->falcon || more_bits(il, nl) ? DTYPE_Q4_K
                                                    : DTYPE_Q3_K;
        else if (ft == FT_Q3_K_L)
            ty = mi->falcon ? DTYPE_Q4_K : DTYPE_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (mi->falcon)
                ty = il < nl / 16 ? DTYPE_Q6_K : more_bits(il, nl) ? DTYPE_Q5_K : DTYPE_Q4_K;
            else if (more_bits(il, nl))
                ty = DTYPE_Q6_K;
        } else if (il < nl / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS))
            ty = DTYPE_Q5_K;
        else if (ft == FT_Q5_K_M && more_bits(il, nl))
            ty = DTYPE_Q6_K;
        else if (ft == FT_Q4_K_S && !mi->falcon && il < nl / 8)
            ty = DTYPE_Q5_K;
        r->i_ffn_down++;
    } else if (c == CAT_ATTN_OUTPUT) {
        if (!mi->falcon) {
            if (mi->n_expert == 8) {
                if (ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL ||
                    ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ4_XS)
                    ty = DTYPE_Q5_K;
            } else if (ft == FT_Q2_K) {
                ty = DTYPE_Q3_K;
            } else if (ft == FT_Q3_K_M) {
                ty = DTYPE_Q4_K;
            } else if (ft == FT_Q3_K_L) {
                ty = DTYPE_Q5_K;
            }
        } else if (ft == FT_Q3_K_L) {
            ty = DTYPE_Q4_K;
        }
    } else if (c == CAT_FFN_GATE || c == CAT_FFN_UP) {
        /* Only IQ3_XS changes these; the layer check and the counter still run. */
        int *counter = c == CAT_FFN_GATE ? &r->i_ffn_gate : &r->i_ffn_up;
        if ((st = ffn_layer(r, *counter, t->name, &il, err, err_len)))
            return st;
        (*counter)++;
    }
    *out = ty;
    return HEARTH_OK;
}

/* tensor_type_fallback: a type whose block divides the row length. */
static enum hearth_status fallback(const struct gguf_tensor *t, enum dtype ty, FILE *warn,
                                   int *n_fallback, enum dtype *out, char *err, size_t err_len)
{
    const int64_t ncols = t->ne[0];
    *out                = ty;
    if (ncols % dtype_get(ty)->block == 0)
        return HEARTH_OK;
    enum dtype to;
    switch (ty) {
    case DTYPE_IQ4_XS:
        to = DTYPE_IQ4_NL;
        break;
    case DTYPE_Q2_K:
    case DTYPE_Q3_K:
    case DTYPE_TQ1_0:
    case DTYPE_TQ2_0:
        to = DTYPE_Q4_0;
        break;
    case DTYPE_Q4_K:
        to = DTYPE_Q5_0;
        break;
    case DTYPE_Q5_K:
        to = DTYPE_Q5_1;
        break;
    case DTYPE_Q6_K:
        to = DTYPE_Q8_0;
        break;
    default:
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "quantize: tensor %s has rows of %" PRId64 " elements, not a multiple of the "
                    "%s block of %" PRIu32 ", and %s has no fallback type",
                    t->name, ncols, dtype_name(ty), dtype_get(ty)->block, dtype_name(ty));
    }
    if (ncols % dtype_get(to)->block)
        to = DTYPE_F16;
    (*n_fallback)++;
    if (warn)
        fprintf(warn,
                "quantize: %s: rows of %" PRId64 " are not a multiple of %" PRIu32
                " (needed by %s), using %s\n",
                t->name, ncols, dtype_get(ty)->block, dtype_name(ty), dtype_name(to));
    *out = to;
    return HEARTH_OK;
}

static bool is_quantized(uint32_t t)
{
    return t != DTYPE_F32 && t != DTYPE_F16 && t != DTYPE_BF16;
}

/* Sort key of llama.cpp's output order: layer (-1 for non-layer tensors), then name. */
struct order_key {
    int layer;
    const char *name;
    int64_t index;
};

static int cmp_order(const void *a, const void *b)
{
    const struct order_key *x = a, *y = b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

void quant_plan_free(struct quant_plan *plan)
{
    free(plan->order);
    free(plan->type);
    memset(plan, 0, sizeof *plan);
}

enum hearth_status quant_plan_make(const struct gguf_file *f, const struct quant_preset *p,
                                   FILE *warn, struct quant_plan *plan, char *err, size_t err_len)
{
    memset(plan, 0, sizeof *plan);
    const int64_t n = gguf_n_tensors(f);
    struct model_info mi;
    enum hearth_status st;
    model_info_read(f, &mi);
    plan->n                = n;
    plan->order            = malloc((size_t)(n ? n : 1) * sizeof *plan->order);
    plan->type             = malloc((size_t)(n ? n : 1) * sizeof *plan->type);
    struct order_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!plan->order || !plan->type || !keys) {
        free(keys);
        quant_plan_free(plan);
        return fail(HEARTH_ENOMEM, err, err_len,
                    "quantize: out of memory planning %" PRId64 " tensors", n);
    }
    struct rules r = {.mi = &mi, .ft = p->ftype, .tied_embeddings = true};
    for (int64_t i = 0; i < n; i++) {
        const char *name = gguf_tensor(f, i)->name;
        keys[i]          = (struct order_key){layer_of(name), name, i};
        enum cat c       = category(name);
        if (c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B)
            r.n_attn_v++;
        if (c == CAT_OUTPUT)
            r.tied_embeddings = false;
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_order);
    for (int64_t k = 0; k < n; k++)
        plan->order[k] = keys[k].index;
    free(keys);

    const bool base_quantized = is_quantized(p->base);
    for (int64_t k = 0; k < n; k++) {
        const struct gguf_tensor *t = gguf_tensor(f, plan->order[k]);
        enum dtype ty               = (enum dtype)t->type;
        if (allows_quantization(t)) {
            ty = p->base;
            if (base_quantized) {
                if ((st = rule_type(&r, t, p->base, &ty, err, err_len)) ||
                    (st = fallback(t, ty, warn, &plan->n_fallback, &ty, err, err_len))) {
                    quant_plan_free(plan);
                    return st;
                }
            }
        }
        plan->type[plan->order[k]] = ty;
    }
    return HEARTH_OK;
}

/* ------------------------------------------------------------- the data --- */

/* One chunk of rows for the pool: convert, check, quantize. */
struct job {
    const struct gguf_tensor *t;
    const uint8_t *src; /* first input row of the chunk */
    size_t src_row_len; /* bytes per input row */
    float *f32;         /* scratch: n_rows * ne0 floats (unused when the input is f32) */
    uint8_t *dst;       /* n_rows output rows */
    size_t dst_row_len;
    enum dtype to;
    int64_t ne0, n_rows;
    void (*to_float)(const void *, float *, int64_t); /* NULL: input is f32 */
    int64_t *bad_at; /* [nth] first non-finite element of the chunk per thread, or -1 */
};

static void run_job(void *arg, int ith, int nth)
{
    struct job *j = arg;
    long r0, r1;
    threadpool_split((long)j->n_rows, ith, nth, &r0, &r1);
    j->bad_at[ith] = -1;
    for (long r = r0; r < r1; r++) {
        const float *x;
        if (j->to_float) {
            float *y = j->f32 + (size_t)r * (size_t)j->ne0;
            j->to_float(j->src + (size_t)r * j->src_row_len, y, j->ne0);
            x = y;
        } else {
            x = (const float *)(j->src + (size_t)r * j->src_row_len);
        }
        for (int64_t e = 0; e < j->ne0; e++) {
            if (!isfinite(x[e])) {
                j->bad_at[ith] = (int64_t)r * j->ne0 + e;
                return;
            }
        }
        quant_row(j->to, x, j->dst + (size_t)r * j->dst_row_len, j->ne0);
    }
}

static void shape_str(const struct gguf_tensor *t, char *buf, size_t cap)
{
    int nd     = n_dims_of(t);
    size_t len = 0;
    buf[0]     = 0;
    for (int d = 0; d < nd && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, d ? "x%" PRId64 : "%" PRId64, t->ne[d]);
}

/* Quantizes tensor t (rows of ne0 from its input type) to type to, appending to w. */
static enum hearth_status quant_tensor(const struct gguf_tensor *t, enum dtype to,
                                       struct threadpool *tp, struct gguf_writer *w,
                                       const struct quant_params *qp, char *err, size_t err_len)
{
    const int64_t ne0                                = t->ne[0];
    const int64_t n_rows                             = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t src_row_len                         = dtype_row_len((enum dtype)t->type, ne0);
    const size_t dst_row_len                         = dtype_row_len(to, ne0);
    void (*to_float)(const void *, float *, int64_t) = NULL;
    if (t->type != DTYPE_F32) {
        if (is_quantized(t->type) && !qp->allow_requantize)
            return fail(HEARTH_EUNSUPPORTED, err, err_len,
                        "quantize: tensor %s is already %s; requantizing loses quality "
                        "(--allow-requantize to do it anyway)",
                        t->name, dtype_name(t->type));
        to_float = kernels_get()->type[t->type].to_float;
        if (!to_float)
            return fail(HEARTH_EUNSUPPORTED, err, err_len,
                        "quantize: tensor %s is %s, which hearth cannot dequantize yet", t->name,
                        dtype_name(t->type));
    }
    int64_t rows_per_chunk = ne0 >= CHUNK_FLOATS ? 1 : CHUNK_FLOATS / ne0;
    if (rows_per_chunk > n_rows)
        rows_per_chunk = n_rows;
    const int nth = threadpool_size(tp);
    int64_t bad_at[nth];
    float *f32   = to_float ? malloc((size_t)rows_per_chunk * (size_t)ne0 * sizeof(float)) : NULL;
    uint8_t *dst = malloc((size_t)rows_per_chunk * dst_row_len);
    enum hearth_status st = HEARTH_OK;
    if ((to_float && !f32) || !dst) {
        st = fail(HEARTH_ENOMEM, err, err_len, "quantize: out of memory for tensor %s", t->name);
        goto out;
    }
    for (int64_t r = 0; r < n_rows; r += rows_per_chunk) {
        struct job j = {
            .t           = t,
            .src         = (const uint8_t *)t->data + (size_t)r * src_row_len,
            .src_row_len = src_row_len,
            .f32         = f32,
            .dst         = dst,
            .dst_row_len = dst_row_len,
            .to          = to,
            .ne0         = ne0,
            .n_rows      = n_rows - r < rows_per_chunk ? n_rows - r : rows_per_chunk,
            .to_float    = to_float,
            .bad_at      = bad_at,
        };
        threadpool_run(tp, run_job, &j);
        for (int i = 0; i < nth; i++) {
            if (bad_at[i] >= 0) {
                int64_t e = r * ne0 + bad_at[i];
                st        = fail(HEARTH_EFORMAT, err, err_len,
                                 "quantize: tensor %s has a non-finite value at element %" PRId64
                                 " (row %" PRId64 ")",
                                 t->name, e, e / ne0);
                goto out;
            }
        }
        if ((st = gguf_writer_write(w, dst, (size_t)j.n_rows * dst_row_len, err, err_len)))
            goto out;
    }
out:
    free(f32);
    free(dst);
    return st;
}

/* Metadata keys not copied: rewritten at the end, or meaningless in one output file. */
static bool key_dropped(struct gguf_str k)
{
    static const char *const drop[] = {"general.quantization_version", "general.file_type",
                                       "split.no", "split.count", "split.tensors.count"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (k.len == strlen(drop[i]) && !memcmp(k.ptr, drop[i], (size_t)k.len))
            return true;
    return false;
}

enum hearth_status quant_file(const char *in, const char *out, const struct quant_preset *p,
                              const struct quant_params *qp, char *err, size_t err_len)
{
    struct gguf_file *f    = NULL;
    struct gguf_writer *w  = NULL;
    struct threadpool *tp  = NULL;
    struct quant_plan plan = {0};
    enum hearth_status st;
    const double t0 = now_s();

    if ((st = gguf_open(in, &f, err, err_len)))
        return st;
    if ((st = quant_plan_make(f, p, qp->progress, &plan, err, err_len)))
        goto out;
    if (!(w = gguf_writer_new()) || !(tp = threadpool_new(qp->n_threads > 0 ? qp->n_threads : 1))) {
        st = fail(HEARTH_ENOMEM, err, err_len, "quantize: out of memory");
        goto out;
    }
    for (int64_t i = 0; i < gguf_n_kv(f); i++)
        if (!key_dropped(gguf_key(f, i)) && (st = gguf_writer_copy_kv(w, f, i, err, err_len)))
            goto out;
    if ((st = gguf_writer_set_u32(w, "general.quantization_version", QNT_VERSION, err, err_len)) ||
        (st = gguf_writer_set_u32(w, "general.file_type", p->ftype, err, err_len)))
        goto out;
    for (int64_t k = 0; k < plan.n; k++) {
        const struct gguf_tensor *t = gguf_tensor(f, plan.order[k]);
        if ((st = gguf_writer_add_tensor(w, t->name, plan.type[plan.order[k]], t->n_dims, t->ne,
                                         err, err_len)))
            goto out;
    }
    if ((st = gguf_writer_begin(w, out, err, err_len)))
        goto out;

    uint64_t bytes_in = 0, bytes_out = 0, n_elem = 0;
    const int width = snprintf(NULL, 0, "%" PRId64, plan.n);
    for (int64_t k = 0; k < plan.n; k++) {
        const struct gguf_tensor *t = gguf_tensor(f, plan.order[k]);
        const enum dtype to         = plan.type[plan.order[k]];
        if (qp->progress) {
            char shape[96];
            shape_str(t, shape, sizeof shape);
            fprintf(qp->progress, "[%*" PRId64 "/%" PRId64 "] %-32s %6s -> %-6s %s\n", width, k + 1,
                    plan.n, t->name, dtype_name(t->type), dtype_name(to), shape);
            fflush(qp->progress);
        }
        if (to == t->type)
            st = gguf_writer_write(w, t->data, (size_t)t->size, err, err_len);
        else
            st = quant_tensor(t, to, tp, w, qp, err, err_len);
        if (st)
            goto out;
        bytes_in += t->size;
        bytes_out += gguf_writer_tensor_size(w, k);
        n_elem += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    if ((st = gguf_writer_finish(w, err, err_len)))
        goto out;
    if (qp->progress) {
        fprintf(qp->progress,
                "quantize: %s: %" PRId64 " tensors, %.2f MiB -> %.2f MiB (%.2f bpw) in %.1f s\n",
                p->name, plan.n, bytes_in / 1048576.0, bytes_out / 1048576.0,
                n_elem ? bytes_out * 8.0 / (double)n_elem : 0.0, now_s() - t0);
        if (plan.n_fallback)
            fprintf(qp->progress, "quantize: %d of %" PRId64 " tensors needed a fallback type\n",
                    plan.n_fallback, plan.n);
    }
out:
    quant_plan_free(&plan);
    threadpool_free(tp);
    gguf_writer_free(w);
    gguf_close(f);
    return st;
}
