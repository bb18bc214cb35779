/*
 * stages.c: layers across backends. At load, model_place decides the
 * model's stages (contiguous layer ranges, each on one backend and device)
 * from n_gpu_layers or layer_split; a context then holds one backend state
 * per stage (stages.h), and forward.c runs each range on its stage, handing
 * the residual stream across each boundary through the host.
 *
 * Invariant: stages cover layers 0..n_layer in order without gaps; only the
 * last may be empty (it then holds the output alone). At most
 * MODEL_MAX_STAGES.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/budget.h"
#include "model/model.h"
#include "model/stages.h"
#include "util/errfmt.h"

/* ---------------------------------------------------------- placement --- */

const struct stage_place *model_stage_of(const struct hearth_model *m, int32_t l)
{
    for (int32_t i = 0; i < m->n_stage - 1; i++)
        if (l < m->stage[i].l1)
            return &m->stage[i];
    return &m->stage[m->n_stage - 1];
}

const struct backend *model_weight_refuser(const struct hearth_model *m, enum dtype type)
{
    for (int32_t i = 0; i < m->n_stage; i++)
        if (!m->stage[i].be->weight_supported(type))
            return m->stage[i].be;
    return NULL;
}

bool model_weight_supported(const struct hearth_model *m, enum dtype type)
{
    return !model_weight_refuser(m, type);
}

/* The GPU backend device `device` runs on, or NULL with the reason in why. */
static const struct backend *gpu_backend(int device, char *why, size_t why_len)
{
    return backend_vulkan(device, why, why_len);
}

static enum hearth_status no_gpu(const char *what, int device, const char *why, char *err,
                                 size_t err_len)
{
    return fail(HEARTH_EUNSUPPORTED, err, err_len,
                "model: %s asks for a GPU, but Vulkan device %d cannot be used: %s", what, device,
                why);
}

/* Appends a stage of layers [l0, l1) on (be, device). */
static void add_stage(struct hearth_model *m, const struct backend *be, int device, int32_t l0,
                      int32_t l1)
{
    m->stage[m->n_stage++] = (struct stage_place){.be = be, .device = device, .l0 = l0, .l1 = l1};
}

enum hearth_status model_place_ngl(struct hearth_model *m, int32_t ngl, const struct backend *cpu,
                                   const struct gpu_share *gpus, int n_gpu)
{
    const int32_t n = m->hp.n_layer, on_gpu = ngl < n ? ngl : n;
    double total = 0;
    for (int i = 0; i < n_gpu; i++)
        total += gpus[i].share;
    m->n_stage = 0;
    if (on_gpu < n)
        add_stage(m, cpu, 0, 0, n - on_gpu);
    /* device i ends where the shares before it and its own end, rounded: contiguous ranges
     * that add up to on_gpu whatever the rounding */
    double cum = 0;
    int32_t at = n - on_gpu;
    for (int i = 0; i < n_gpu && on_gpu > 0; i++) {
        cum += gpus[i].share;
        int32_t end = i == n_gpu - 1 ? n : n - on_gpu + (int32_t)(on_gpu * (cum / total) + 0.5);
        if (end > n)
            end = n;
        if (end > at)
            add_stage(m, gpus[i].be, gpus[i].device, at, end);
        at = end > at ? end : at;
    }
    /* llama.cpp keeps the output on the CPU unless -ngl passes the layer count */
    if (on_gpu > 0 && ngl <= n)
        add_stage(m, cpu, 0, n, n);
    return HEARTH_OK;
}

/* Reads "name[device]" from s (up to its ':'), the name letters, the device digits. */
static bool split_name(const char *s, size_t len, char *name, size_t name_len, int *device)
{
    size_t i = 0;
    while (i < len && isalpha((unsigned char)s[i]))
        i++;
    if (i == 0 || i >= name_len)
        return false;
    memcpy(name, s, i);
    name[i] = 0;
    *device = 0;
    if (i == len)
        return true;
    long d = 0;
    for (size_t j = i; j < len; j++) {
        if (!isdigit((unsigned char)s[j]) || j - i > 3)
            return false;
        d = d * 10 + (s[j] - '0');
    }
    *device = (int)d;
    return true;
}

static enum hearth_status place_split(struct hearth_model *m, const char *split, char *err,
                                      size_t err_len)
{
    const int32_t n_layer = m->hp.n_layer;
    int32_t at            = 0;
    m->n_stage            = 0;
    for (const char *s = split; *s;) {
        const char *end  = strchr(s, ','), *colon;
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        char name[16], *num_end;
        int device;
        colon = memchr(s, ':', len);
        if (!colon || !split_name(s, (size_t)(colon - s), name, sizeof name, &device))
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: layer_split entry '%.*s' is not BACKEND[DEVICE]:LAYERS", (int)len,
                        s);
        const long count = strtol(colon + 1, &num_end, 10);
        if (num_end != s + len || num_end == colon + 1 || count < 0 || count > (1 << 30))
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: layer_split entry '%.*s' needs a layer count in 0..%d", (int)len, s,
                        n_layer);
        if (at + count > n_layer)
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: layer_split '%s' places more than the model's %d layers", split,
                        n_layer);
        const struct backend *be;
        if (!strcmp(name, "cpu")) {
            if (device != 0)
                return fail(HEARTH_EINVAL, err, err_len,
                            "model: layer_split names cpu%d, but the CPU is one device (cpu)",
                            device);
            be = backend_cpu();
        } else if (!strcmp(name, "vulkan")) {
            char why[256];
            if (!(be = gpu_backend(device, why, sizeof why)))
                return no_gpu("layer_split", device, why, err, err_len);
        } else {
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: layer_split names backend '%s'; hearth knows cpu and vulkan<i>",
                        name);
        }
        if (m->n_stage == MODEL_MAX_STAGES)
            return fail(HEARTH_EINVAL, err, err_len, "model: layer_split has more than %d ranges",
                        MODEL_MAX_STAGES);
        if (count == 0 && end)
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: layer_split entry '%.*s' has no layers, which only the last "
                        "(the output alone) may have",
                        (int)len, s);
        if (count == 0 && m->n_stage == 0)
            return fail(HEARTH_EINVAL, err, err_len, "model: layer_split '%s' places no layer",
                        split);
        add_stage(m, be, device, at, at + (int32_t)count);
        at += (int32_t)count;
        s = end ? end + 1 : s + len;
        if (end && !*s)
            return fail(HEARTH_EINVAL, err, err_len, "model: layer_split '%s' ends with a comma",
                        split);
    }
    if (at != n_layer)
        return fail(HEARTH_EINVAL, err, err_len,
                    "model: layer_split '%s' places %d layers but the model has %d", split, at,
                    n_layer);
    return HEARTH_OK;
}

/*
 * The GPUs of p->devices ("vulkan0,vulkan1"; NULL or empty: vulkan0), each
 * once, into gpus[0..*n) (device and an equal share; be found later).
 */
static enum hearth_status parse_devices(const struct hearth_model_params *p, struct gpu_share *gpus,
                                        int *n, char *err, size_t err_len)
{
    const char *devices = p->devices && *p->devices ? p->devices : "vulkan0";
    *n                  = 0;
    for (const char *s = devices;;) {
        const char *end  = strchr(s, ',');
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        char name[16];
        int device;
        if (!split_name(s, len, name, sizeof name, &device) || strcmp(name, "vulkan") ||
            len == strlen(name))
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: device '%.*s' is not a GPU as hearth devices names them "
                        "(vulkan0, vulkan1, ...)",
                        (int)len, s);
        for (int i = 0; i < *n; i++)
            if (gpus[i].device == device)
                return fail(HEARTH_EINVAL, err, err_len, "model: devices '%s' names vulkan%d twice",
                            devices, device);
        if (*n == MODEL_MAX_STAGES - 2)
            return fail(HEARTH_EINVAL, err, err_len, "model: devices '%s' names more than %d GPUs",
                        devices, MODEL_MAX_STAGES - 2);
        gpus[(*n)++] = (struct gpu_share){.device = device, .share = 1};
        if (!end)
            return HEARTH_OK;
        s = end + 1;
    }
}

/*
 * Reads tensor_split ("3:1", or llama.cpp's "3,1") into the shares of the n
 * GPUs: one number >= 0 per device, not all zero.
 */
static enum hearth_status parse_shares(const char *split, struct gpu_share *gpus, int n, char *err,
                                       size_t err_len)
{
    const char sep = strchr(split, ':') ? ':' : ',';
    int i          = 0;
    double total   = 0;
    for (const char *s = split;; i++) {
        const char *end  = strchr(s, sep);
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        char num[32], *num_end;
        if (len == 0 || len >= sizeof num)
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: tensor_split '%s' has an entry that is not a number", split);
        memcpy(num, s, len);
        num[len]       = 0;
        const double v = strtod(num, &num_end);
        if (num_end != num + len || !isfinite(v) || isspace((unsigned char)num[0]))
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: tensor_split entry '%s' is not a number", num);
        if (v < 0)
            return fail(HEARTH_EINVAL, err, err_len,
                        "model: tensor_split entry '%s' is negative; each device's share is a "
                        "number >= 0",
                        num);
        if (i < n)
            gpus[i].share = v;
        total += v;
        if (!end)
            break;
        s = end + 1;
    }
    if (i + 1 != n)
        return fail(HEARTH_EINVAL, err, err_len,
                    "model: tensor_split '%s' has %d share%s but %d device%s %s given; give one "
                    "share per device",
                    split, i + 1, i ? "s" : "", n, n == 1 ? "" : "s", n == 1 ? "is" : "are");
    if (!(total > 0))
        return fail(HEARTH_EINVAL, err, err_len,
                    "model: tensor_split '%s' gives every device a zero share", split);
    if (!isfinite(total))
        return fail(HEARTH_EINVAL, err, err_len,
                    "model: tensor_split '%s' has shares too large to add up", split);
    return HEARTH_OK;
}

enum hearth_status model_place(struct hearth_model *m, const struct hearth_model_params *p,
                               char *err, size_t err_len)
{
    enum hearth_status st;
    m->n_stage = 0;
    if (p->n_gpu_layers < 0)
        return fail(HEARTH_EINVAL, err, err_len, "model: n_gpu_layers %d is negative",
                    p->n_gpu_layers);
    const bool split = p->layer_split && *p->layer_split, devs = p->devices && *p->devices,
               ts = p->tensor_split && *p->tensor_split;
    if (split && (p->n_gpu_layers > 0 || devs || ts))
        return fail(HEARTH_EINVAL, err, err_len,
                    "model: layer_split places every layer itself; give it without "
                    "n_gpu_layers, devices and tensor_split");
    if (ts && p->n_gpu_layers == 0)
        return fail(HEARTH_EINVAL, err, err_len,
                    "model: tensor_split shares the offloaded layers among devices, but "
                    "n_gpu_layers is 0");
    struct gpu_share gpus[MODEL_MAX_STAGES];
    int n_gpu = 0;
    char what[48];
    snprintf(what, sizeof what, p->n_gpu_layers ? "n_gpu_layers %d" : "devices", p->n_gpu_layers);
    /* what the flags say is checked before whether the machine has the devices, so a
     * malformed --tensor-split is named as such everywhere */
    if ((devs || p->n_gpu_layers > 0) &&
        ((st = parse_devices(p, gpus, &n_gpu, err, err_len)) ||
         (ts && (st = parse_shares(p->tensor_split, gpus, n_gpu, err, err_len)))))
        return st;
    for (int i = 0; i < n_gpu; i++) {
        char why[256];
        if (!(gpus[i].be = gpu_backend(gpus[i].device, why, sizeof why)))
            return no_gpu(what, gpus[i].device, why, err, err_len);
    }
    if (split)
        st = place_split(m, p->layer_split, err, err_len);
    else if (p->n_gpu_layers > 0)
        st = model_place_ngl(m, p->n_gpu_layers, backend_cpu(), gpus, n_gpu);
    else {
        add_stage(m, backend_get(), 0, 0, m->hp.n_layer);
        st = HEARTH_OK;
    }
    if (st) {
        m->n_stage = 0;
        return st;
    }
    m->be = m->stage[0].be;
    return HEARTH_OK;
}

/* ------------------------------------------------------------- context --- */

void stage_enter(struct hearth_context *ctx, int32_t i)
{
    ctx->st = &ctx->stages[i];
    ctx->be = ctx->stages[i].state;
}

enum hearth_status stages_init(struct hearth_context *ctx, char *err, size_t err_len)
{
    const struct hearth_model *m = ctx->model;
    /* an MTP context is one stage: the head, where the output runs */
    ctx->n_stage       = ctx->p.mtp ? 1 : m->n_stage;
    struct mem_acct *a = &ctx->acct;
    if (!(ctx->stages = acct_calloc(a, MEM_OTHER, (size_t)ctx->n_stage, sizeof *ctx->stages)))
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
    if (ctx->n_stage > 1 &&
        !(ctx->x_host =
              acct_calloc(a, MEM_COMPUTE, (size_t)ctx->p.n_batch * m->hp.n_embd, sizeof(float))))
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory for a batch of %d",
                    ctx->p.n_batch);
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        struct stage *s = &ctx->stages[i];
        s->place        = ctx->p.mtp ? &m->mtp_place : &m->stage[i];
        s->embed        = i == 0;
        s->output       = i == ctx->n_stage - 1;
    }
    /* the head's backend is the CPU's (the only one with nextn_input), whose memory load and
     * budget.c do not check */
    enum hearth_status st = ctx->p.mtp ? HEARTH_OK : budget_check_context(ctx, err, err_len);
    if (st)
        return st;
    ctx->state_len = 0;
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        struct stage *s = &ctx->stages[i];
        stage_enter(ctx, i);
        st       = s->place->be->ctx_init(ctx, err, err_len);
        s->state = ctx->be;
        if (st)
            return st;
        s->state_len = s->place->be->state_len(ctx);
        s->state_off = ctx->state_len;
        ctx->state_len += s->state_len;
    }
    if (ctx->state_len && !(ctx->snap_rows = acct_calloc(a, MEM_OTHER, (size_t)ctx->p.n_batch,
                                                         sizeof *ctx->snap_rows)))
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
    return HEARTH_OK;
}

int32_t hearth_context_n_stages(const struct hearth_context *ctx)
{
    return ctx->n_stage;
}

bool hearth_context_stage(const struct hearth_context *ctx, int32_t i,
                          struct hearth_stage_info *out)
{
    if (i < 0 || i >= ctx->n_stage)
        return false;
    const struct stage *s = &ctx->stages[i];
    memset(out, 0, sizeof *out);
    budget_device_name(s->place, out->device, sizeof out->device);
    out->layer_first    = s->place->l0;
    out->layer_end      = s->place->l1;
    out->output         = s->output;
    out->weight_bytes   = s->place->weight_bytes;
    out->kv_bytes       = s->kv_bytes;
    struct mem_acct dev = {{0}}, host = {{0}};
    if (s->state && s->place->be->ctx_memory)
        s->place->be->ctx_memory(s->state, &dev, &host);
    mem_acct_public(&dev, &out->memory);
    return true;
}

void stages_free(struct hearth_context *ctx)
{
    /* later stages may borrow from earlier ones (the CPU's thread pool): free them first */
    for (int32_t i = ctx->n_stage - 1; ctx->stages && i >= 0; i--) {
        stage_enter(ctx, i);
        if (ctx->stages[i].place)
            ctx->stages[i].place->be->ctx_free(ctx);
        ctx->stages[i].state = NULL;
    }
    free(ctx->stages);
    free(ctx->x_host);
    free(ctx->snap_rows);
    ctx->stages    = NULL;
    ctx->x_host    = NULL;
    ctx->snap_rows = NULL;
    ctx->st        = NULL;
    ctx->be        = NULL;
}

void stages_cross(struct hearth_context *ctx, int32_t to, int32_t n)
{
    ctx->st->place->be->residual_get(ctx, n, ctx->x_host);
    stage_enter(ctx, to);
    ctx->st->place->be->residual_set(ctx, n, ctx->x_host);
}

void stages_seq_reset(struct hearth_context *ctx, int32_t seq)
{
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        stage_enter(ctx, i);
        ctx->st->place->be->seq_reset(ctx, seq);
    }
}

void stages_state_load(struct hearth_context *ctx, int32_t seq, const float *src)
{
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        if (!ctx->stages[i].state_len)
            continue;
        stage_enter(ctx, i);
        ctx->st->place->be->state_load(ctx, seq, src + ctx->st->state_off);
    }
}

void stages_state_save_plan(struct hearth_context *ctx, int32_t n)
{
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        if (!ctx->stages[i].state_len)
            continue;
        stage_enter(ctx, i);
        float **rows = ctx->st->place->be->state_save_rows(ctx);
        for (int32_t t = 0; t < n; t++)
            rows[t] = ctx->snap_rows[t] ? ctx->snap_rows[t] + ctx->st->state_off : NULL;
    }
}

void stages_kv_copy(void *arg, int group, int32_t dst, int32_t src, int32_t n_rows)
{
    struct hearth_context *ctx = arg;
    const struct stage *cur    = ctx->st;
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        if (ctx->stages[i].place->be->kv_host)
            continue;
        stage_enter(ctx, i);
        ctx->st->place->be->kv_copy(ctx, group, dst, src, n_rows);
    }
    if (cur)
        stage_enter(ctx, (int32_t)(cur - ctx->stages));
}
