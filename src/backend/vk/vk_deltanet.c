/*
 * vk_deltanet.c: Gated DeltaNet on a Vulkan device (vk_deltanet.h): the
 * dispatches of conv1d, dnet_prep and deltanet, and a stage's recurrent
 * state with the snapshots of it the host keeps.
 *
 * Snapshots: the host names, per batch, the rows whose sequence state it
 * keeps (state_save_rows). At the batch's first DeltaNet layer those rows
 * get slots in a device buffer, which the conv and the scan fill as the
 * rows pass; after each layer the slots come back to the host, into each
 * row's snapshot at the layer's offsets. A batch without snapshots costs
 * nothing more than a flag.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vk/vk_deltanet.h"
#include "backend/vk/vk_internal.h"
#include "backend/vk/vk_memlaw.h"
#include "model/types.h"
#include "util/errfmt.h"

/* ---------------------------------------------------------- operations --- */

static enum hearth_status check_shape(const char *op, const struct vk_dnet_shape *sh,
                                      uint32_t n_tok, char *err, size_t err_len)
{
    if (sh->n_conv < 2 || sh->n_conv > 16 || sh->S == 0 || sh->n_k == 0 || sh->n_v % sh->n_k ||
        sh->n_v == 0 || sh->conv_dim != (2 * sh->n_k + sh->n_v) * sh->S || n_tok == 0)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: %s of %u rows: conv %u taps (2..16), state %u, %u key heads, %u "
                    "value heads (a multiple), conv_dim %u (2 n_k S + n_v S)",
                    op, n_tok, sh->n_conv, sh->S, sh->n_k, sh->n_v, sh->conv_dim);
    return HEARTH_OK;
}

static enum hearth_status check_snap(const char *op, const struct vk_dnet_snap *snap, uint64_t need,
                                     uint32_t n_tok, char *err, size_t err_len)
{
    enum hearth_status st;
    if (!snap)
        return HEARTH_OK;
    if (need > snap->stride)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: %s: a snapshot of %llu floats past slots of %u", op,
                    (unsigned long long)need, snap->stride);
    if ((st = vk_check_len(op, "the snapshot slots", snap->slots, (uint64_t)n_tok * 4, err,
                           err_len)) ||
        (st = vk_check_len(op, "the snapshots", snap->buf,
                           (uint64_t)snap->n_slot * snap->stride * 4, err, err_len)))
        return st;
    return HEARTH_OK;
}

enum hearth_status vk_op_conv1d(struct vk_seq *s, const struct vk_dnet_shape *sh, struct vk_buf *x,
                                struct vk_buf *taps, struct vk_buf *state, uint32_t n_seq,
                                struct vk_buf *rows, uint32_t n_tok,
                                const struct vk_dnet_snap *snap, char *err, size_t err_len)
{
    enum hearth_status st;
    if ((st = check_shape("conv1d", sh, n_tok, err, err_len)))
        return st;
    const uint64_t C = sh->conv_dim, K = sh->n_conv;
    if (n_seq == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: conv1d over a state of 0 sequences");
    if ((st = vk_check_len("conv1d", "the rows", x, (uint64_t)n_tok * C * 4, err, err_len)) ||
        (st = vk_check_len("conv1d", "the taps", taps, C * K * 4, err, err_len)) ||
        (st =
             vk_check_len("conv1d", "the windows", state, n_seq * C * (K - 1) * 4, err, err_len)) ||
        (st = vk_check_len("conv1d", "the batch rows", rows, (uint64_t)n_tok * 8, err, err_len)) ||
        (st = check_snap("conv1d", snap, C * (K - 1), n_tok, err, err_len)))
        return st;
    const uint32_t push[6] = {(uint32_t)C, (uint32_t)K,  n_tok,
                              n_seq,       snap != NULL, snap ? snap->stride : 0};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "conv1d", 6, sizeof push, &p, err, err_len)))
        return st;
    const uint32_t groups[3] = {(uint32_t)(C + 63) / 64, 1, 1};
    /* without snapshots the shader reads no slot: rows stands in for both bindings */
    struct vk_buf *bufs[6] = {
        x, taps, state, rows, snap ? snap->slots : rows, snap ? snap->buf : rows};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

enum hearth_status vk_op_dnet_prep(struct vk_seq *s, const struct vk_dnet_shape *sh,
                                   struct vk_buf *x, struct vk_buf *beta, struct vk_buf *g,
                                   struct vk_buf *dt_bias, struct vk_buf *a, uint32_t n_tok,
                                   float eps, char *err, size_t err_len)
{
    enum hearth_status st;
    if ((st = check_shape("dnet_prep", sh, n_tok, err, err_len)))
        return st;
    const uint64_t nv = sh->n_v;
    if ((st = vk_check_len("dnet_prep", "the rows", x, (uint64_t)n_tok * sh->conv_dim * 4, err,
                           err_len)) ||
        (st = vk_check_len("dnet_prep", "beta", beta, n_tok * nv * 4, err, err_len)) ||
        (st = vk_check_len("dnet_prep", "g", g, n_tok * nv * 4, err, err_len)) ||
        (st = vk_check_len("dnet_prep", "dt_bias", dt_bias, nv * 4, err, err_len)) ||
        (st = vk_check_len("dnet_prep", "a", a, nv * 4, err, err_len)))
        return st;
    struct {
        uint32_t S, n_k, n_v, C, n_tok;
        float eps;
    } push = {sh->S, sh->n_k, sh->n_v, sh->conv_dim, n_tok, eps};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "dnet_prep", 5, sizeof push, &p, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid(n_tok, groups);
    struct vk_buf *bufs[5] = {x, beta, g, dt_bias, a};
    return vk_seq_dispatch(s, p, bufs, &push, groups, err, err_len);
}

enum hearth_status vk_op_dnet_scan(struct vk_seq *s, const struct vk_dnet_shape *sh,
                                   struct vk_buf *x, struct vk_buf *beta, struct vk_buf *g,
                                   struct vk_buf *state, uint32_t n_seq, struct vk_buf *o,
                                   struct vk_buf *rows, uint32_t n_tok,
                                   const struct vk_dnet_snap *snap, char *err, size_t err_len)
{
    enum hearth_status st;
    if ((st = check_shape("deltanet", sh, n_tok, err, err_len)))
        return st;
    const uint64_t nv = sh->n_v, S = sh->S, mats = nv * S * S;
    if (n_seq == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: deltanet over a state of 0 sequences");
    if ((st = vk_check_len("deltanet", "the rows", x, (uint64_t)n_tok * sh->conv_dim * 4, err,
                           err_len)) ||
        (st = vk_check_len("deltanet", "beta", beta, n_tok * nv * 4, err, err_len)) ||
        (st = vk_check_len("deltanet", "g", g, n_tok * nv * 4, err, err_len)) ||
        (st = vk_check_len("deltanet", "the state", state, n_seq * mats * 4, err, err_len)) ||
        (st = vk_check_len("deltanet", "the output", o, n_tok * nv * S * 4, err, err_len)) ||
        (st =
             vk_check_len("deltanet", "the batch rows", rows, (uint64_t)n_tok * 8, err, err_len)) ||
        (st = check_snap("deltanet", snap, (snap ? snap->off : 0) + mats, n_tok, err, err_len)))
        return st;
    if (x == o)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: deltanet writes over its input");
    struct {
        uint32_t S, n_k, n_v, C, n_tok, n_seq;
        float scale;
        uint32_t snap, stride, off;
    } push = {sh->S,
              sh->n_k,
              sh->n_v,
              sh->conv_dim,
              n_tok,
              n_seq,
              1.0f / sqrtf((float)sh->S),
              snap != NULL,
              snap ? snap->stride : 0,
              snap ? snap->off : 0};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "deltanet", 8, sizeof push, &p, err, err_len)))
        return st;
    const uint32_t groups[3] = {(sh->S + 31) / 32, sh->n_v, 1};
    struct vk_buf *bufs[8]   = {
          x, beta, g, state, o, rows, snap ? snap->slots : rows, snap ? snap->buf : rows};
    return vk_seq_dispatch(s, p, bufs, &push, groups, err, err_len);
}

/* ---------------------------------------------------- a stage's state --- */

struct dnet_layer {
    struct vk_buf *conv;    /* [n_seq][conv_dim][n_conv - 1] windows */
    struct vk_buf *ssm;     /* [n_seq][n_v][S][S] matrices */
    struct vk_buf *taps;    /* [conv_dim][n_conv] */
    struct vk_buf *dt_bias; /* [n_v] */
    struct vk_buf *a;       /* [n_v] */
    struct vk_buf *norm;    /* [S] */
};

struct vk_dnet {
    struct vk_dev *d;
    struct vk_dnet_shape sh;
    int32_t l0;      /* the stage's first layer */
    int32_t *idx;    /* [l1 - l0] a layer's index among the stage's DeltaNet ones, or -1 */
    int32_t n_layer; /* DeltaNet layers of the stage */
    int32_t n_seq, n_batch;
    uint32_t n_embd;        /* floats of a row of the layer's input */
    size_t conv_len;        /* floats of one (layer, sequence) window */
    size_t ssm_len;         /* floats of one (layer, sequence) set of matrices */
    struct dnet_layer *lay; /* [n_layer] */
    /* scratch, [n_batch] rows each */
    struct vk_buf *qkv;  /* [n][conv_dim] projection, then the conv's output */
    struct vk_buf *z;    /* [n][n_v S] output gate, then the gated output */
    struct vk_buf *beta; /* [n][n_v] */
    struct vk_buf *g;    /* [n][n_v] */
    struct vk_buf *o;    /* [n][n_v S] the scan's output */
    /* snapshots */
    float **save;             /* [n_batch] host destinations (state_save_rows), NULL: none */
    int32_t *slot;            /* [n_batch] the batch's slot map as uploaded */
    struct vk_dnet_snap snap; /* .buf NULL until a batch takes a snapshot */
    uint32_t n_used;          /* slots this batch fills */
    int32_t n_tok;            /* rows of the batch the slot map covers */
    bool planned;             /* the batch's plan is uploaded */
    float *host;              /* [snap.n_slot][snap.stride] one layer's snapshots, downloaded */
};

/* A device buffer of len bytes, counted under kind. */
static enum hearth_status counted(struct vk_dev *d, size_t len, enum mem_kind kind,
                                  struct mem_acct *acct, struct vk_buf **out, char *err,
                                  size_t err_len)
{
    enum hearth_status st = vk_buf_new(d, len, out, err, err_len);
    if (!st)
        acct->b[kind] += len;
    return st;
}

static enum hearth_status upload_vec(struct vk_dev *d, const float *v, size_t n,
                                     struct mem_acct *acct, struct vk_buf **out, char *err,
                                     size_t err_len)
{
    enum hearth_status st = counted(d, n * sizeof(float), MEM_WEIGHTS, acct, out, err, err_len);
    return st ? st : vk_buf_upload(*out, 0, v, n * sizeof(float), err, err_len);
}

enum hearth_status vk_dnet_new(struct vk_dev *d, const struct hearth_model *m, int32_t l0,
                               int32_t l1, int32_t n_seq, int32_t n_batch, struct mem_acct *acct,
                               struct vk_dnet **out, char *err, size_t err_len)
{
    *out            = NULL;
    int32_t n_layer = 0;
    for (int32_t l = l0; l < l1; l++)
        n_layer += m->layers[l].dnet != NULL;
    if (!n_layer)
        return HEARTH_OK;
    const struct dnet_dims dd = m->hp.dnet;
    struct vk_dnet *dn        = calloc(1, sizeof *dn);
    if (!dn)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    *out            = dn;
    dn->d           = d;
    dn->sh          = (struct vk_dnet_shape){(uint32_t)dd.n_conv, (uint32_t)dd.S, (uint32_t)dd.n_k,
                                             (uint32_t)dd.n_v, (uint32_t)dd.conv_dim};
    dn->l0          = l0;
    dn->n_layer     = n_layer;
    dn->n_seq       = n_seq;
    dn->n_batch     = n_batch;
    dn->n_embd      = (uint32_t)m->hp.n_embd;
    dn->conv_len    = (size_t)(dd.n_conv - 1) * dd.conv_dim;
    dn->ssm_len     = (size_t)dd.n_v * dd.S * dd.S;
    const size_t nb = (size_t)n_batch, f = sizeof(float);
    struct memlaw_vk_dnet law;
    memlaw_vk_dnet(m, n_seq, n_batch, &law);
    dn->idx  = malloc((size_t)(l1 - l0) * sizeof *dn->idx);
    dn->lay  = calloc((size_t)n_layer, sizeof *dn->lay);
    dn->save = calloc(nb, sizeof *dn->save);
    dn->slot = malloc(nb * sizeof *dn->slot);
    float *zeros =
        calloc((size_t)n_seq * (dn->ssm_len > dn->conv_len ? dn->ssm_len : dn->conv_len), f);
    enum hearth_status st = HEARTH_OK;
    if (!dn->idx || !dn->lay || !dn->save || !dn->slot || !zeros)
        st = fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    const enum mem_kind C = MEM_COMPUTE;
    if (!st && !(st = counted(d, law.qkv, C, acct, &dn->qkv, err, err_len)) &&
        !(st = counted(d, law.z, C, acct, &dn->z, err, err_len)) &&
        !(st = counted(d, law.beta, C, acct, &dn->beta, err, err_len)) &&
        !(st = counted(d, law.g, C, acct, &dn->g, err, err_len)) &&
        !(st = counted(d, law.o, C, acct, &dn->o, err, err_len)))
        st = counted(d, law.slots, C, acct, &dn->snap.slots, err, err_len);
    for (int32_t l = l0, i = 0; !st && l < l1; l++) {
        const struct dnet *src = m->layers[l].dnet;
        dn->idx[l - l0]        = src ? i : -1;
        if (!src)
            continue;
        struct dnet_layer *L = &dn->lay[i++];
        if ((st = counted(d, law.conv, MEM_KV, acct, &L->conv, err, err_len)) ||
            (st = vk_buf_upload(L->conv, 0, zeros, law.conv, err, err_len)) ||
            (st = counted(d, law.ssm, MEM_KV, acct, &L->ssm, err, err_len)) ||
            (st = vk_buf_upload(L->ssm, 0, zeros, law.ssm, err, err_len)) ||
            (st = upload_vec(d, src->conv, (size_t)dd.conv_dim * dd.n_conv, acct, &L->taps, err,
                             err_len)) ||
            (st = upload_vec(d, src->dt_bias, (size_t)dd.n_v, acct, &L->dt_bias, err, err_len)) ||
            (st = upload_vec(d, src->a, (size_t)dd.n_v, acct, &L->a, err, err_len)) ||
            (st = upload_vec(d, src->norm, (size_t)dd.S, acct, &L->norm, err, err_len)))
            break;
    }
    free(zeros);
    return st;
}

void vk_dnet_free(struct vk_dnet *dn)
{
    if (!dn)
        return;
    for (int32_t i = 0; dn->lay && i < dn->n_layer; i++) {
        struct dnet_layer *L = &dn->lay[i];
        struct vk_buf *all[] = {L->conv, L->ssm, L->taps, L->dt_bias, L->a, L->norm};
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            vk_buf_free(all[j]);
    }
    struct vk_buf *all[] = {dn->qkv, dn->z, dn->beta, dn->g, dn->o, dn->snap.slots, dn->snap.buf};
    for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
        vk_buf_free(all[j]);
    free(dn->lay);
    free(dn->idx);
    free(dn->save);
    free(dn->slot);
    free(dn->host);
    free(dn);
}

enum hearth_status vk_dnet_reset(struct vk_dnet *dn, int32_t seq, char *err, size_t err_len)
{
    if (seq < 0 || seq >= dn->n_seq)
        return HEARTH_OK;
    const size_t f = sizeof(float);
    float *zeros   = calloc(dn->ssm_len > dn->conv_len ? dn->ssm_len : dn->conv_len, f);
    if (!zeros)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    enum hearth_status st = HEARTH_OK;
    for (int32_t i = 0; !st && i < dn->n_layer; i++)
        if (!(st = vk_buf_upload(dn->lay[i].conv, seq * dn->conv_len * f, zeros, dn->conv_len * f,
                                 err, err_len)))
            st = vk_buf_upload(dn->lay[i].ssm, seq * dn->ssm_len * f, zeros, dn->ssm_len * f, err,
                               err_len);
    free(zeros);
    return st;
}

size_t vk_dnet_state_len(const struct vk_dnet *dn)
{
    return dn ? (size_t)dn->n_layer * (dn->conv_len + dn->ssm_len) : 0;
}

enum hearth_status vk_dnet_load(struct vk_dnet *dn, int32_t seq, const float *src, char *err,
                                size_t err_len)
{
    if (seq < 0 || seq >= dn->n_seq)
        return fail(HEARTH_ERANGE, err, err_len, "vulkan: state of sequence %d of %d", seq,
                    dn->n_seq);
    const size_t f = sizeof(float), mats = (size_t)dn->n_layer * dn->conv_len;
    enum hearth_status st = HEARTH_OK;
    for (int32_t i = 0; !st && i < dn->n_layer; i++)
        if (!(st = vk_buf_upload(dn->lay[i].conv, seq * dn->conv_len * f, src + i * dn->conv_len,
                                 dn->conv_len * f, err, err_len)))
            st = vk_buf_upload(dn->lay[i].ssm, seq * dn->ssm_len * f, src + mats + i * dn->ssm_len,
                               dn->ssm_len * f, err, err_len);
    return st;
}

float **vk_dnet_save_rows(struct vk_dnet *dn)
{
    return dn->save;
}

void vk_dnet_batch_begin(struct vk_dnet *dn)
{
    dn->planned = false;
    dn->n_used  = 0;
}

bool vk_dnet_plan_pending(const struct vk_dnet *dn)
{
    return !dn->planned;
}

enum hearth_status vk_dnet_plan(struct vk_dnet *dn, int32_t n_tok, char *err, size_t err_len)
{
    uint32_t n = 0;
    for (int32_t t = 0; t < n_tok; t++)
        dn->slot[t] = dn->save[t] ? (int32_t)n++ : -1;
    /* a plan that fails takes no snapshot: the batch's layers still run */
    dn->planned = true;
    dn->n_used  = 0;
    dn->n_tok   = n_tok;
    if (!n)
        return HEARTH_OK;
    enum hearth_status st;
    if (n > dn->snap.n_slot) {
        /* slots for the most snapshots a batch has asked for yet: rarely more than one per
         * sequence, so this grows a few times at most */
        const size_t stride = dn->conv_len + dn->ssm_len;
        if (stride > UINT32_MAX)
            return fail(HEARTH_ERANGE, err, err_len,
                        "vulkan: a DeltaNet layer's state of %zu floats", stride);
        vk_buf_free(dn->snap.buf);
        dn->snap.buf    = NULL;
        dn->snap.n_slot = 0;
        float *host     = realloc(dn->host, n * stride * sizeof(float));
        if (!host)
            return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
        dn->host = host;
        if ((st = vk_buf_new(dn->d, n * stride * sizeof(float), &dn->snap.buf, err, err_len)))
            return st;
        dn->snap.n_slot = n;
        dn->snap.stride = (uint32_t)stride;
        dn->snap.off    = (uint32_t)dn->conv_len;
    }
    if ((st = vk_buf_upload(dn->snap.slots, 0, dn->slot, (size_t)n_tok * 4, err, err_len)))
        return st;
    dn->n_used = n;
    return HEARTH_OK;
}

bool vk_dnet_saving(const struct vk_dnet *dn)
{
    return dn->n_used > 0;
}

enum hearth_status vk_dnet_forward(struct vk_dnet *dn, struct vk_seq *s, int32_t l,
                                   const struct vk_dnet_weights *w, struct vk_buf *xb,
                                   struct vk_buf *rows, int32_t n_tok, float eps, char *err,
                                   size_t err_len)
{
    const int32_t i                 = dn->idx[l - dn->l0];
    const struct dnet_layer *L      = &dn->lay[i];
    const struct vk_dnet_snap *snap = dn->n_used ? &dn->snap : NULL;
    const uint32_t n = (uint32_t)n_tok, vd = dn->sh.n_v * dn->sh.S, ns = (uint32_t)dn->n_seq;
    struct vk_buf *const proj[4] = {dn->qkv, dn->z, dn->beta, dn->g};
    enum hearth_status st        = HEARTH_OK;
    /* the four projections share their input, rounded once per type as the CPU's prev does */
    for (int j = 0; !st && j < DNET_OUT; j++) {
        struct vk_buf *in = w->act[j] == DTYPE_F32 ? xb : w->actq;
        if (in != xb && (j == 0 || w->act[j - 1] != w->act[j]))
            st = vk_op_act_round(s, w->act[j], xb, in, n * dn->n_embd, err, err_len);
        if (!st)
            st = vk_op_matmul_w(s, w->w[j], in, proj[j], n, err, err_len);
    }
    if (st ||
        (st = vk_op_conv1d(s, &dn->sh, dn->qkv, L->taps, L->conv, ns, rows, n, snap, err,
                           err_len)) ||
        (st = vk_op_dnet_prep(s, &dn->sh, dn->qkv, dn->beta, dn->g, L->dt_bias, L->a, n, eps, err,
                              err_len)) ||
        (st = vk_op_dnet_scan(s, &dn->sh, dn->qkv, dn->beta, dn->g, L->ssm, ns, dn->o, rows, n,
                              snap, err, err_len)) ||
        (st = vk_op_rmsnorm(s, dn->o, L->norm, dn->o, dn->sh.S, n * dn->sh.n_v, eps, err,
                            err_len)) ||
        /* z = SiLU(z) o, the CPU's silu_mul(o, z, o) */
        (st = vk_op_swiglu(s, dn->z, dn->o, n * vd, err, err_len)))
        return st;
    struct vk_buf *z = dn->z;
    if (w->act[DNET_OUT] != DTYPE_F32) {
        z = w->actq;
        if ((st = vk_op_act_round(s, w->act[DNET_OUT], dn->z, z, n * vd, err, err_len)))
            return st;
    }
    return vk_op_matmul_w(s, w->w[DNET_OUT], z, xb, n, err, err_len);
}

enum hearth_status vk_dnet_fetch(struct vk_dnet *dn, int32_t l, char *err, size_t err_len)
{
    const int32_t i = dn->idx[l - dn->l0];
    const size_t f = sizeof(float), stride = dn->snap.stride;
    enum hearth_status st =
        vk_buf_download(dn->snap.buf, 0, dn->host, dn->n_used * stride * f, err, err_len);
    if (st)
        return st;
    for (int32_t t = 0; t < dn->n_tok; t++) {
        if (!dn->save[t] || dn->slot[t] < 0)
            continue;
        const float *from = dn->host + (size_t)dn->slot[t] * stride;
        memcpy(dn->save[t] + (size_t)i * dn->conv_len, from, dn->conv_len * f);
        memcpy(dn->save[t] + (size_t)dn->n_layer * dn->conv_len + (size_t)i * dn->ssm_len,
               from + dn->conv_len, dn->ssm_len * f);
    }
    return HEARTH_OK;
}
