/*
 * llamacpp_graph.c: the reserve graphs llama.cpp builds for the families
 * hearth loads (llama, qwen2, qwen3, qwen3moe, gemma3 and the hybrid
 * DeltaNet qwen35moe), node for node as its graph builders make them, so
 * that ggml_replay.c can place them as ggml's allocator does. Where a
 * tensor lands depends on the holes the ones before it left, which no
 * closed form follows across shapes; the replay does.
 *
 * The graphs are llama-server's: the CPU's fused gated delta net and no
 * rollback snapshots for the hybrid family, the K/V in n_stream streams of
 * `cells` cells (a sliding window's in `swa_cells`). Tensors a cache or a
 * weight owns are leaves of their own buffers: only their place in the
 * visiting order matters.
 */
#include "fit/llamacpp_graph.h"

#include <stdio.h>
#include <string.h>

#include "fit/ggml_replay.h"
#include "gguf/gguf.h"
#include "model/deltanet.h"
#include "model/model.h"

#define F32 ((uint32_t)DTYPE_F32)

/* A K/V cache's inputs: where the batch's rows go, the mask over its cells, its rotations. */
struct kv_in {
    int k_idxs, v_idxs, mask, k_rot, v_rot;
    int64_t cells;
};

/* What the file holds that changes the graph, read once for all of a run's reserves. */
struct features {
    bool hybrid;        /* DeltaNet layers: qwen35moe's and qwen35's graph */
    struct dnet_dims d; /* their shapes (hybrid) */
    bool iswa;          /* two caches (llama_kv_cache_iswa), whose build_attn expands k before v */
    bool post_norms;    /* gemma3's norms after attention and after the FFN */
    bool qkv_fused, q_bias, k_bias, v_bias, o_bias, qk_norm, out_bias, gate_up_merged;
    bool expert_scale;
};

/* One reserve graph being built: the model, the run's shape, the inputs every layer reads. */
struct lg {
    struct gr_graph *g;
    const struct hearth_model *m;
    const struct llamacpp_graph *p;
    const struct features *f;
    int64_t T, ns, nst; /* tokens, sequences, tokens a sequence */
    int s_copy, s_main, s_extra, pos, out_ids;
    struct kv_in kv[2]; /* the full cache's and a sliding window's */
};

static const int64_t ONE[4] = {1, 1, 1, 1};

static int weight(struct lg *h, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2)
{
    return gr_leaf(h->g, type, true, 0, ne0, ne1, ne2, 1);
}

static int input(struct lg *h, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
    return gr_leaf(h->g, type, false, GR_INPUT, ne0, ne1, ne2, ne3);
}

static const int64_t *ne_of(struct lg *h, int a)
{
    return a >= 0 ? h->g->t[a].ne : ONE;
}

/* An op whose result has a's shape: unary, binary and norm ops. */
static int like(struct lg *h, bool inplace, int a, int b)
{
    const int src[] = {a, b, -1};
    return gr_op(h->g, inplace, F32, ne_of(h, a), src);
}

static int op(struct lg *h, bool inplace, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2,
              int64_t ne3, int a, int b, int c)
{
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const int src[]     = {a, b, c, -1};
    return gr_op(h->g, inplace, type, ne, src);
}

static int mul_mat(struct lg *h, int w, int x)
{
    const int64_t *a = ne_of(h, w), *b = ne_of(h, x);
    return op(h, false, F32, a[1], b[1], b[2], b[3], w, x, -1);
}

static int rms_norm(struct lg *h, int x, int w)
{
    return like(h, true, like(h, true, x, -1), w);
}

static int view(struct lg *h, int a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1,
                size_t nb2, size_t nb3, size_t offs)
{
    if (a < 0)
        return -1;
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const size_t nb[4]  = {h->g->t[a].nb[0], nb1, nb2, nb3};
    return gr_view(h->g, a, ne, nb, offs);
}

static int into(struct lg *h, int dst, int a, int b, int c)
{
    const int src[] = {a, b, c, -1};
    return gr_into(h->g, dst, src);
}

/* llama_mul_mat_hadamard: x's rows of the rotation's width times the rotation. */
static int hadamard(struct lg *h, int x, int rot)
{
    int64_t ne[4]; /* a copy: adding tensors moves the array ne_of points into */
    memcpy(ne, ne_of(h, x), sizeof ne);
    const int64_t r = ne_of(h, rot)[0], n = ne[0] * ne[1] * ne[2] * ne[3];
    const int y = mul_mat(h, rot, gr_reshape(h->g, x, r, n / r, 1, 1));
    return gr_reshape(h->g, y, ne[0], ne[1], ne[2], ne[3]);
}

/* build_rs: one recurrent cache's rows for the batch's sequences, the rest copied along. */
static int recurrent_rows(struct lg *h, int64_t width)
{
    struct gr_graph *g = h->g;
    const int64_t n_rs = h->p->n_seq_max;
    const int s        = gr_leaf(g, F32, true, 0, width, n_rs, 1, 1);
    const int states   = gr_reshape(g, s, width, n_rs, 1, 1);
    const int zero     = view(h, states, width, 1, 1, 1, 4 * width, 4 * width, 4 * width, 0);
    gr_expand(g, into(h, zero, zero, -1, -1));
    const int rows = op(h, false, F32, width, h->ns, 1, 1, states, h->s_main, -1);
    gr_expand(g, rows);
    const int extra = op(h, false, F32, width, n_rs - h->ns, 1, 1, states, h->s_extra, -1);
    const int rest  = view(h, s, width, n_rs - h->ns, 1, 1, 4 * width, 0, 0, 0);
    gr_expand(g, into(h, rest, extra, rest, -1));
    return rows;
}

/* build_layer_attn_linear with the fused gated delta net. */
static int deltanet_layer(struct lg *h, int x)
{
    struct gr_graph *g        = h->g;
    const struct dnet_dims *d = &h->f->d;
    const int64_t S = d->S, nk = d->n_k, nv = d->n_v, C = d->conv_dim, E = h->m->hp.n_embd;
    const int64_t T = h->T, ns = h->ns, nst = h->nst;

    const int qkv = gr_reshape(g, mul_mat(h, weight(h, F32, E, C, 1), x), C, nst, ns, 1);
    const int z   = mul_mat(h, weight(h, F32, E, S * nv, 1), x);
    const int beta =
        like(h, true, gr_reshape(g, mul_mat(h, weight(h, F32, E, nv, 1), x), 1, nv, nst, ns), -1);
    const int alpha = gr_reshape(g, mul_mat(h, weight(h, F32, E, nv, 1), x), nv, nst, ns, 1);
    const int soft  = like(h, true, like(h, true, alpha, weight(h, F32, nv, 1, 1)), -1);
    const int gate  = gr_reshape(g, like(h, true, soft, weight(h, F32, nv, 1, 1)), 1, nv, nst, ns);

    /* build_conv_state */
    const int64_t taps  = d->n_conv - 1;
    const int conv_rows = recurrent_rows(h, taps * C);
    const int states    = gr_reshape(g, conv_rows, taps, C, ns, 1);
    const int conv_in   = op(h, false, F32, taps + nst, C, ns, 1, states, gr_transpose(g, qkv), -1);
    const size_t nb1 = 4 * (size_t)(taps + nst), nb2 = nb1 * (size_t)C;
    const int last   = view(h, conv_in, taps, C, ns, 1, nb1, nb2, nb2 * ns, 4 * (size_t)nst);
    const int update = gr_leaf(g, F32, true, 0, taps * C, ns, 1, 1);
    gr_expand(g, into(h, update, last, update, -1));

    const int ssm   = recurrent_rows(h, S * S * nv);
    const int state = gr_reshape(g, ssm, S, S, nv, ns);

    const int conv =
        like(h, true,
             op(h, false, F32, C, nst, ns, 1, conv_in, weight(h, F32, d->n_conv, C, 1), -1), -1);
    const size_t r1 = 4 * (size_t)C, r2 = r1 * (size_t)nst, r3 = r2 * (size_t)ns;
    const int q = like(h, false, view(h, conv, S, nk, nst, ns, r1, r2, r3, 0), -1);
    const int k =
        like(h, false, view(h, conv, S, nk, nst, ns, r1, r2, r3, 4 * (size_t)(S * nk)), -1);
    const int v = view(h, conv, S, nv, nst, ns, r1, r2, r3, 8 * (size_t)(S * nk));

    const int64_t ne[4] = {S * nv, T + S * ns, 1, 1};
    const int src[]     = {q, k, v, gate, beta, state, -1};
    const int gdn       = gr_op(g, false, F32, ne, src);
    const size_t o1 = 4 * (size_t)S, o2 = o1 * (size_t)nv, o3 = o2 * (size_t)nst;
    const int out   = view(h, gdn, S, nv, nst, ns, o1, o2, o3, 0);
    const size_t s2 = o1 * (size_t)S, s3 = s2 * (size_t)nv;
    const int fresh = view(h, gdn, S, S, nv, ns, o1, s2, s3, o2 * (size_t)T);
    const int dst   = gr_leaf(g, F32, true, 0, S * S * nv, ns, 1, 1);
    gr_expand(g, into(h, dst, fresh, dst, -1));

    /* build_norm_gated, the output projection */
    const int normed = rms_norm(h, out, weight(h, F32, S, 1, 1));
    const int silu   = like(h, true, gr_reshape(g, z, S, nv, nst, ns), -1);
    const int gated  = gr_reshape(g, like(h, true, normed, silu), S * nv, nst, ns, 1);
    return gr_reshape(g, mul_mat(h, weight(h, F32, S * nv, E, 1), gated), E, T, 1, 1);
}

/* The cache's rows in the head layout build_attn_mha reads (a view of a cache: no bytes). */
static int cache_view(struct lg *h, uint32_t type, bool transposed, int64_t cells)
{
    const int64_t hd = h->m->hp.head_dim, nkv = h->m->hp.n_head_kv, ns = h->p->n_stream;
    const int c = gr_leaf(h->g, type, true, 0, hd * nkv, cells * ns, 1, 1);
    const int v = transposed ? view(h, c, cells, nkv, hd, ns, 0, 0, 0, 0)
                             : view(h, c, hd, nkv, cells, ns, 0, 0, 0, 0);
    return gr_permute(h->g, v, 0, 2, 1, 3);
}

/*
 * build_attn from the roped q, k and v ([head, heads, T]) to the heads'
 * output ([head x heads, T]) before the output projection: the rotations
 * of a quantized cache, the rows' copies into the cache, and attention
 * with flash attention or without.
 */
static int attend(struct lg *h, int q, int k, int v, bool swa)
{
    struct gr_graph *g             = h->g;
    const struct llamacpp_graph *p = h->p;
    const struct kv_in *in         = &h->kv[swa];
    const int64_t hd = h->m->hp.head_dim, nh = h->m->hp.n_head, nkv = h->m->hp.n_head_kv;
    const int64_t T = h->T, ns = p->n_stream;

    if (in->k_rot >= 0) {
        q = hadamard(h, q, in->k_rot);
        k = hadamard(h, k, in->k_rot);
    }
    if (in->v_rot >= 0)
        v = hadamard(h, v, in->v_rot);
    gr_expand(g, q);
    gr_expand(g, h->f->iswa ? k : v);
    gr_expand(g, h->f->iswa ? v : k);
    const int kc    = gr_leaf(g, p->type_k, true, 0, hd * nkv, in->cells * ns, 1, 1);
    const size_t e1 = 4 * (size_t)hd * nkv;
    gr_expand(g, into(h, kc, view(h, k, hd * nkv, T, 1, 1, e1, e1 * T, e1 * T, 0), in->k_idxs, kc));
    const int vc = gr_leaf(g, p->type_v, true, 0, hd * nkv, in->cells * ns, 1, 1);
    if (p->flash_attn) {
        gr_expand(
            g, into(h, vc, view(h, v, hd * nkv, T, 1, 1, e1, e1 * T, e1 * T, 0), in->v_idxs, vc));
    } else {
        const int flat = gr_reshape(g, gr_reshape(g, v, hd * nkv, T, 1, 1), 1, hd * nkv * T, 1, 1);
        gr_expand(g, into(h, vc, flat, in->v_idxs, vc));
    }

    /* build_attn_mha */
    const size_t q1 = 4 * (size_t)hd, q2 = q1 * (size_t)nh;
    const int qs =
        gr_permute(g, view(h, q, hd, nh, T / ns, ns, q1, q2, q2 * (T / ns), 0), 0, 2, 1, 3);
    int cur;
    if (p->flash_attn) {
        const int kp        = cache_view(h, p->type_k, false, in->cells);
        const int vp        = cache_view(h, p->type_v, false, in->cells);
        const int64_t ne[4] = {hd, nh, T / ns, ns};
        const int src[]     = {qs, kp, vp, in->mask, -1};
        cur                 = gr_reshape(g, gr_op(g, false, F32, ne, src), hd * nh, T, 1, 1);
    } else {
        const int vp  = cache_view(h, p->type_v, true, in->cells);
        const int kp  = cache_view(h, p->type_k, false, in->cells);
        const int kq  = like(h, true, mul_mat(h, kp, qs), in->mask);
        const int kqv = mul_mat(h, vp, kq);
        cur           = op(h, false, F32, hd * nh, T, 1, 1, gr_permute(g, kqv, 0, 2, 1, 3), -1, -1);
    }
    gr_expand(g, cur);
    if (in->v_rot >= 0)
        cur = hadamard(h, cur, in->v_rot);
    return cur;
}

/* qwen35moe's build_layer_attn: one projection for q and its gate, q and k normed. */
static int gated_attention(struct lg *h, int x)
{
    struct gr_graph *g = h->g;
    const int64_t hd = h->m->hp.head_dim, nh = h->m->hp.n_head, nkv = h->m->hp.n_head_kv;
    const int64_t E = h->m->hp.n_embd, T = h->T;

    const int full  = mul_mat(h, weight(h, F32, E, 2 * hd * nh, 1), x);
    const size_t f1 = 8 * (size_t)hd, f2 = f1 * (size_t)nh;
    int q = rms_norm(h, view(h, full, hd, nh, T, 1, f1, f2, f2 * T, 0), weight(h, F32, hd, 1, 1));
    const int kx   = mul_mat(h, weight(h, F32, E, hd * nkv, 1), x);
    const int vx   = mul_mat(h, weight(h, F32, E, hd * nkv, 1), x);
    int k          = rms_norm(h, gr_reshape(g, kx, hd, nkv, T, 1), weight(h, F32, hd, 1, 1));
    const int gate = op(h, false, F32, hd * nh, T, 1, 1,
                        view(h, full, hd, nh, T, 1, f1, f2, f2 * T, 4 * (size_t)hd), -1, -1);
    const int v    = gr_reshape(g, vx, hd, nkv, T, 1);
    q              = like(h, true, q, h->pos);
    k              = like(h, true, k, h->pos);
    const int cur  = like(h, true, attend(h, q, k, v, false), like(h, true, gate, -1));
    return mul_mat(h, weight(h, F32, hd * nh, E, 1), cur);
}

/* A projection of x to n rows, with its bias when the file has one. */
static int project(struct lg *h, int x, int64_t n, bool bias)
{
    const int y = mul_mat(h, weight(h, F32, h->m->hp.n_embd, n, 1), x);
    return bias ? like(h, true, y, weight(h, F32, n, 1, 1)) : y;
}

/* build_qkv, the q/k norms, rope and build_attn with the output projection. */
static int attention(struct lg *h, int x, bool swa)
{
    struct gr_graph *g       = h->g;
    const struct hparams *hp = &h->m->hp;
    const int64_t hd = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv, T = h->T;
    int q, k, v;
    if (h->f->qkv_fused) { /* one projection; q, k and v are views of its rows */
        const int qkv   = project(h, x, hd * (nh + 2 * nkv), h->f->q_bias);
        const size_t r1 = 4 * (size_t)hd * (nh + 2 * nkv);
        q               = view(h, qkv, hd, nh, T, 1, 4 * hd, r1, r1 * T, 0);
        k               = view(h, qkv, hd, nkv, T, 1, 4 * hd, r1, r1 * T, 4 * (size_t)(hd * nh));
        v = view(h, qkv, hd, nkv, T, 1, 4 * hd, r1, r1 * T, 4 * (size_t)(hd * (nh + nkv)));
    } else {
        q = gr_reshape(g, project(h, x, hd * nh, h->f->q_bias), hd, nh, T, 1);
        k = gr_reshape(g, project(h, x, hd * nkv, h->f->k_bias), hd, nkv, T, 1);
        v = gr_reshape(g, project(h, x, hd * nkv, h->f->v_bias), hd, nkv, T, 1);
    }
    if (h->f->qk_norm)
        q = rms_norm(h, q, weight(h, F32, hd, 1, 1));
    q = like(h, true, q, h->pos);
    if (h->f->qk_norm)
        k = rms_norm(h, k, weight(h, F32, hd, 1, 1));
    k = like(h, true, k, h->pos);
    if (hp->q_scale > 0)
        q = like(h, true, q, -1);
    int cur = mul_mat(h, weight(h, F32, hd * nh, hp->n_embd, 1), attend(h, q, k, v, swa));
    if (h->f->o_bias)
        cur = like(h, true, cur, weight(h, F32, hp->n_embd, 1, 1));
    return cur;
}

/* build_ffn with a gate (LLM_FFN_PAR), SiLU or gemma3's GELU, over x's rows. */
static int ffn(struct lg *h, int x)
{
    const int64_t E = h->m->hp.n_embd, F = h->m->hp.n_ff, T = ne_of(h, x)[1];
    const int up   = mul_mat(h, weight(h, F32, E, F, 1), x);
    const int gate = mul_mat(h, weight(h, F32, E, F, 1), x);
    return mul_mat(h, weight(h, F32, F, E, 1), op(h, false, F32, F, T, 1, 1, gate, up, -1));
}

/* build_moe_ffn with softmax gating and normalized weights; qwen35moe adds its shared expert. */
static int moe_ffn(struct lg *h, int x)
{
    struct gr_graph *g       = h->g;
    const struct hparams *hp = &h->m->hp;
    const int64_t E = hp->n_embd, T = ne_of(h, x)[1], n = hp->n_expert, k = hp->n_expert_used;

    const int probs  = like(h, true, mul_mat(h, weight(h, F32, E, n, 1), x), -1);
    const int sorted = op(h, false, GR_I32, n, T, 1, 1, probs, -1, -1);
    const int chosen = view(h, sorted, k, T, 1, 1, 4 * n, 4 * n * T, 4 * n * T, 0);
    int w            = op(h, false, F32, 1, k, T, 1, gr_reshape(g, probs, 1, n, T, 1), chosen, -1);
    w                = gr_reshape(g, w, k, T, 1, 1);
    const int sum    = op(h, false, F32, 1, T, 1, 1, w, -1, -1);
    w = gr_reshape(g, like(h, true, w, gr_into(g, sum, (const int[]){sum, -1})), 1, k, T, 1);
    if (h->f->expert_scale)
        w = like(h, true, w, -1);
    gr_expand(g, w);

    const int xs    = gr_reshape(g, x, E, 1, T, 1);
    const int64_t f = hp->n_ff_exp;
    int up, gt;
    if (h->f->gate_up_merged) { /* one matmul, its halves seen as gate and up */
        const int both = op(h, false, F32, 2 * f, k, T, 1, weight(h, F32, E, 2 * f, n), xs, chosen);
        const size_t b1 = 8 * (size_t)f, b2 = b1 * (size_t)k;
        gt = view(h, both, f, k, T, 1, b1, b2, b2 * T, 0);
        up = view(h, both, f, k, T, 1, b1, b2, b2 * T, 4 * (size_t)f);
    } else {
        up = op(h, false, F32, f, k, T, 1, weight(h, F32, E, f, n), xs, chosen);
        gt = op(h, false, F32, f, k, T, 1, weight(h, F32, E, f, n), xs, chosen);
    }
    const int act = op(h, false, F32, f, k, T, 1, gt, up, -1);
    int experts   = op(h, false, F32, E, k, T, 1, weight(h, F32, f, E, n), act, chosen);
    experts       = like(h, true, experts, w);
    gr_expand(g, experts);
    const size_t e1 = 4 * (size_t)E, e2 = e1 * (size_t)k;
    /* the views are all ordered before the adds */
    int views[LLAMACPP_MAX_EXPERTS] = {-1};
    for (int64_t i = 0; i < k && i < LLAMACPP_MAX_EXPERTS; i++) {
        views[i] = view(h, experts, E, T, 1, 1, e2, e2 * T, e2 * T, e1 * i);
        gr_expand(g, views[i]);
    }
    int out = views[0];
    for (int64_t i = 1; i < k && i < LLAMACPP_MAX_EXPERTS; i++) {
        out = like(h, true, out, views[i]);
        gr_expand(g, out);
    }
    if (k == 1)
        out = op(h, false, F32, E, T, 1, 1, out, -1, -1);
    if (!hp->n_ff_shexp)
        return out;
    const int64_t fs = hp->n_ff_shexp;
    const int sg     = mul_mat(h, weight(h, F32, E, fs, 1), x);
    const int su     = mul_mat(h, weight(h, F32, E, fs, 1), x);
    const int sh = mul_mat(h, weight(h, F32, fs, E, 1), op(h, false, F32, fs, T, 1, 1, sg, su, -1));
    const int sig = like(h, true, mul_mat(h, weight(h, F32, E, 1, 1), x), -1);
    return like(h, true, out, like(h, true, sh, sig));
}

/* A K/V cache's inputs for T tokens. */
static void kv_inputs(struct lg *h, struct kv_in *in, int64_t cells)
{
    const struct hparams *hp = &h->m->hp;
    const int64_t T = h->T, ns = h->p->n_stream;
    in->cells  = cells;
    in->k_idxs = input(h, GR_I64, T, 1, 1, 1);
    in->v_idxs = input(h, GR_I64, h->p->flash_attn ? T : T * hp->n_head_kv * hp->head_dim, 1, 1, 1);
    in->mask   = input(h, h->p->flash_attn ? (uint32_t)DTYPE_F16 : F32, cells, T / ns, 1, ns);
    in->k_rot  = h->p->k_rot ? input(h, F32, h->p->k_rot, h->p->k_rot, 1, 1) : -1;
    in->v_rot  = h->p->v_rot ? input(h, F32, h->p->v_rot, h->p->v_rot, 1, 1) : -1;
}

/* One layer of a family without recurrent layers; x is the residual stream. */
static int plain_layer(struct lg *h, int x, int32_t l)
{
    const struct hparams *hp = &h->m->hp;
    const int64_t E          = hp->n_embd;
    const int normed         = rms_norm(h, x, weight(h, F32, E, 1, 1));
    int cur                  = attention(h, normed, h->m->layers[l].swa);
    int res                  = x;
    if (l == hp->n_layer - 1) { /* only the output rows from here on */
        cur = op(h, false, F32, E, ne_of(h, h->out_ids)[0], 1, 1, cur, h->out_ids, -1);
        res = op(h, false, F32, E, ne_of(h, h->out_ids)[0], 1, 1, res, h->out_ids, -1);
    }
    if (h->f->post_norms)
        cur = rms_norm(h, cur, weight(h, F32, E, 1, 1));
    const int ffn_in = like(h, true, cur, res);
    cur              = rms_norm(h, ffn_in, weight(h, F32, E, 1, 1));
    cur              = hp->n_expert ? moe_ffn(h, cur) : ffn(h, cur);
    if (h->f->post_norms)
        cur = rms_norm(h, cur, weight(h, F32, E, 1, 1));
    return like(h, true, cur, ffn_in);
}

static bool has_tensor(const struct hearth_model *m, const char *name)
{
    return gguf_find_tensor(m->gguf, name) != NULL;
}

static void features_of(const struct hearth_model *m, struct features *f)
{
    memset(f, 0, sizeof *f);
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        f->hybrid |= model_layer_is_dnet(m, l);
        f->iswa |= m->layers[l].swa;
    }
    if (f->hybrid)
        f->d = dnet_dims_of(m);
    f->post_norms     = !strcmp(m->arch, "gemma3");
    f->qkv_fused      = has_tensor(m, "blk.0.attn_qkv.weight") && !f->hybrid;
    f->q_bias         = has_tensor(m, f->qkv_fused ? "blk.0.attn_qkv.bias" : "blk.0.attn_q.bias");
    f->k_bias         = has_tensor(m, "blk.0.attn_k.bias");
    f->v_bias         = has_tensor(m, "blk.0.attn_v.bias");
    f->o_bias         = has_tensor(m, "blk.0.attn_output.bias");
    f->qk_norm        = has_tensor(m, "blk.0.attn_q_norm.weight");
    f->out_bias       = has_tensor(m, "output.bias");
    f->gate_up_merged = f->hybrid && has_tensor(m, "blk.0.ffn_gate_up_exps.weight");
    char key[96];
    float scale = 0;
    snprintf(key, sizeof key, "%s.expert_weights_scale", m->arch);
    f->expert_scale = gguf_get_f32(m->gguf, key, &scale) && scale != 0 && scale != 1;
}

/* llama-server's reserve graph of T tokens in n_seq_max sequences with n_out outputs. */
static uint64_t reserve(const struct hearth_model *m, const struct llamacpp_graph *p,
                        const struct features *f, int64_t T, int64_t n_out)
{
    const struct hparams *hp = &m->hp;
    struct gr_graph g;
    gr_init(&g);
    struct lg h = {.g = &g, .m = m, .p = p, .f = f, .ns = p->n_seq_max, .s_copy = -1};
    h.T         = (T + h.ns - 1) / h.ns * h.ns;
    h.nst       = h.T / h.ns;
    T           = h.T;

    /* build_inp_embd: both inputs, the token rows selected */
    const int tokens = input(&h, GR_I32, T, 1, 1, 1);
    int cur = op(&h, false, F32, hp->n_embd, T, 1, 1, weight(&h, F32, hp->n_embd, hp->n_vocab, 1),
                 tokens, -1);
    gr_expand(&g, cur);
    gr_expand(&g, input(&h, F32, hp->n_embd, T, 1, 1));
    if (hp->embd_scale != 1)
        cur = like(&h, true, cur, -1);

    if (f->hybrid) { /* build_inp_mem_hybrid: the recurrent rows' copy list */
        h.s_copy  = input(&h, GR_I32, p->n_seq_max, 1, 1, 1);
        h.s_main  = view(&h, h.s_copy, h.ns, 1, 1, 1, 4 * h.ns, 4 * h.ns, 4 * h.ns, 0);
        h.s_extra = view(&h, h.s_copy, p->n_seq_max - h.ns, 1, 1, 1, 0, 0, 0, 4 * h.ns);
    }
    kv_inputs(&h, &h.kv[0], p->cells);
    kv_inputs(&h, &h.kv[1], p->swa_cells);
    h.pos     = input(&h, GR_I32, T * (hp->rope_sections[0] ? 4 : 1), 1, 1, 1);
    h.out_ids = input(&h, GR_I32, n_out, 1, 1, 1);

    for (int32_t l = 0; l < hp->n_layer; l++) {
        if (!f->hybrid) {
            cur = plain_layer(&h, cur, l);
            continue;
        }
        const int x = rms_norm(&h, cur, weight(&h, F32, hp->n_embd, 1, 1));
        gr_expand(&g, x);
        const int a   = model_layer_is_dnet(m, l) ? deltanet_layer(&h, x) : gated_attention(&h, x);
        const int res = like(&h, true, a, cur);
        const int in  = rms_norm(&h, res, weight(&h, F32, hp->n_embd, 1, 1));
        const int out = hp->n_expert ? moe_ffn(&h, in) : ffn(&h, in); /* qwen35: dense */
        cur           = like(&h, true, out, res);
    }
    /* the output: qwen35moe keeps every row's norm (its MTP head reads them) and picks the
     * output rows after it; the others picked them in the last layer */
    const int norm = rms_norm(&h, cur, weight(&h, F32, hp->n_embd, 1, 1));
    const int rows =
        f->hybrid ? op(&h, false, F32, hp->n_embd, n_out, 1, 1, norm, h.out_ids, -1) : norm;
    int logits = mul_mat(&h, weight(&h, F32, hp->n_embd, hp->n_vocab, 1), rows);
    if (f->out_bias)
        logits = like(&h, true, logits, weight(&h, F32, hp->n_vocab, 1, 1));
    if (hp->logit_softcap > 0)
        logits = like(&h, true, like(&h, true, like(&h, true, logits, -1), -1), -1);
    if (!g.oom) {
        g.t[norm].flags |= GR_OUTPUT;
        g.t[rows].flags |= GR_OUTPUT;
        g.t[logits].flags |= GR_OUTPUT;
    }
    gr_expand(&g, logits);
    const uint64_t top = gr_reserve(&g);
    gr_free(&g);
    return top;
}

uint64_t llamacpp_graph_compute(const struct hearth_model *m, const struct llamacpp_graph *p)
{
    /* llama_context reserves the prompt graph, the one-token-a-sequence graph, then the prompt
     * graph again; the buffer is the largest */
    struct features f;
    features_of(m, &f);
    const int64_t n_out = p->n_seq_max < p->n_tokens ? p->n_seq_max : p->n_tokens;
    const uint64_t pp   = reserve(m, p, &f, p->n_tokens, n_out);
    const uint64_t tg   = reserve(m, p, &f, p->n_seq_max, p->n_seq_max);
    return pp && tg ? (pp > tg ? pp : tg) : 0;
}
