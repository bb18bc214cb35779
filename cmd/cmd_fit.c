/*
 * cmd_fit.c: `hearth fit MODEL [...]`: what a serving configuration will
 * hold on each device, from the file's header alone (src/fit/fit.c), as a
 * table or JSON, and with --check an exit status a deployment's CI gates on.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "fit/fit.h"
#include "opts.h"

/* --runtime's values, -fa's and --isa's, in the order of their choices */
enum { RUNTIME_HEARTH, RUNTIME_LLAMACPP };
enum { FA_ON, FA_OFF, FA_AUTO };
enum { ISA_HOST = -1 }; /* --isa not given: this CPU's */
static const enum llamacpp_isa isa_of[] = {LLAMACPP_ISA_AVX512, LLAMACPP_ISA_AVX2,
                                           LLAMACPP_ISA_NEON, LLAMACPP_ISA_NONE};

struct fit_args {
    struct {
        long n_ctx;            /* 0: serve's default (llama.cpp: the training context); CTX_MAX */
        long parallel;         /* 0: not given: 4 (llama.cpp: 4 on one K/V stream) */
        long ubatch;           /* 1..65536 */
        long checkpoints;      /* 0..1024 */
        int64_t cache_ram;     /* bytes; -1: not given */
        const char *draft;     /* or NULL */
        const char *ctk, *ctv; /* checked once --runtime says which types are taken */
    } srv;
    struct thread_args threads;
    struct {
        struct opt_multi devices; /* NAME:BYTES each */
        int64_t floor;            /* bytes */
        bool balance, check, json;
        int runtime; /* RUNTIME_* */
    } plan;
    struct {
        bool unified;
        long batch;     /* 1..1 << 20 */
        int flash_attn; /* FA_* */
        const char *ctkd, *ctvd;
        int isa; /* an index of isa_of, or ISA_HOST */
    } lc;
    struct opt_multi pos; /* MODEL */
};

#define F(g, f) offsetof(struct fit_args, g.f) - offsetof(struct fit_args, g)
/* clang-format off */
static const struct opt serving_list[] = {
    {.names = "-c --ctx-size", .value = "N|max", .kind = OPT_LONG, .off = F(srv, n_ctx), .lo = 1,
     .hi = 1 << 24, .choices = "max", .word_value = CTX_MAX,
     .def = "4096, or the training context when smaller, as serve's; with --runtime llama.cpp "
            "the training context",
     .help = "tokens per slot; max: the largest whole number of K/V blocks that keeps every "
             "device above its floor, up to the training context. With --runtime llama.cpp: the "
             "context every slot shares"},
    {.names = "-np --parallel", .value = "N", .kind = OPT_LONG, .off = F(srv, parallel), .lo = 1,
     .hi = 4096, .def = "4; with --runtime llama.cpp 4 sharing one K/V stream",
     .help = "slots. With --runtime llama.cpp: slots, a K/V stream each"},
    {.names = "-ub --ubatch-size", .value = "N", .kind = OPT_LONG, .off = F(srv, ubatch), .lo = 1,
     .hi = 65536, .def = "512", .help = "tokens per micro-batch"},
    {.names = "--cache-ram -cram", .value = "BYTES", .kind = OPT_BYTES, .off = F(srv, cache_ram),
     .def = "a quarter of the host's memory, 0 with a GPU, as serve's; with --runtime llama.cpp "
            "8G, llama-server's 8192 MiB",
     .help = "the prefix cache's cap beyond the slots, as 8G or 512M. With --runtime llama.cpp: "
             "the prompt cache's cap"},
    {.names = "--ctx-checkpoints --swa-checkpoints", .value = "N", .kind = OPT_LONG,
     .off = F(srv, checkpoints), .lo = 0, .hi = 1024, .def = "8",
     .help = "recurrent models: state snapshots per slot"},
    {.names = "-md --model-draft", .value = "FILE", .kind = OPT_STR, .off = F(srv, draft),
     .help = "a draft model, or an EAGLE-3 or DFlash drafter's file, run on the host"},
    {.names = "-ctk --cache-type-k", .value = "TYPE", .kind = OPT_STR, .off = F(srv, ctk),
     .def = "f16",
     .help = "the K cache's type: f16, f32, q8_0 or q4_0 (the quantized ones need heads of a "
             "multiple of 32 values, on the CPU). With --runtime llama.cpp: f32, f16, bf16, q8_0, "
             "q4_0, q4_1, iq4_nl, q5_0 or q5_1"},
    {.names = "-ctv --cache-type-v", .value = "TYPE", .kind = OPT_STR, .off = F(srv, ctv),
     .def = "f16",
     .help = "the V cache's type: f16, f32 or q8_0. With --runtime llama.cpp: as -ctk's"},
};
/* clang-format on */

/* clang-format off */
static const struct opt plan_list[] = {
    {.names = "--device", .value = "NAME:BYTES", .kind = OPT_MULTI, .off = F(plan, devices),
     .def = "ram with the RAM free now",
     .help = "a device and its memory, as ram:16G or vulkan0:8G; ram is the host, any other name "
             "a GPU, in order; repeatable"},
    {.names = "--floor", .value = "BYTES", .kind = OPT_BYTES, .off = F(plan, floor), .def = "0",
     .help = "memory every device keeps free"},
    {.names = "--balance", .kind = OPT_FLAG, .off = F(plan, balance),
     .help = "split the GPUs' layers so they keep equal free memory, instead of in proportion to "
             "their memory"},
    {.names = "--check", .kind = OPT_FLAG, .off = F(plan, check),
     .help = "exit 1 with the reason when it does not fit"},
    {.names = "--json", .kind = OPT_FLAG, .off = F(plan, json),
     .help = "print JSON (the fields docs/fit.md lists)"},
    {.names = "--runtime", .value = "hearth|llama.cpp", .kind = OPT_CHOICE, .off = F(plan, runtime),
     .choices = "hearth|llama.cpp", .def = "hearth",
     .help = "whose memory to plan: hearth serve's, or llama-server's CPU build with the same file "
             "(the host alone), its flags meaning what llama-server's mean"},
};
/* clang-format on */

/* Given without --runtime llama.cpp, each of these is a usage error. */
/* clang-format off */
static const struct opt llamacpp_list[] = {
    {.names = "-kvu --kv-unified", .kind = OPT_FLAG, .off = F(lc, unified),
     .help = "one K/V stream for every slot"},
    {.names = "-b --batch-size", .value = "N", .kind = OPT_LONG, .off = F(lc, batch), .lo = 1,
     .hi = 1 << 20, .def = "2048", .help = "the logical batch"},
    {.names = "-fa --flash-attn", .value = "on|off|auto", .kind = OPT_CHOICE,
     .off = F(lc, flash_attn), .choices = "on|off|auto", .def = "auto",
     .help = "flash attention; auto is on for a CPU"},
    {.names = "-ctkd --cache-type-k-draft", .value = "TYPE", .kind = OPT_STR, .off = F(lc, ctkd),
     .def = "f16", .help = "the draft model's K cache's type, one of llama.cpp's as -ctk's"},
    {.names = "-ctvd --cache-type-v-draft", .value = "TYPE", .kind = OPT_STR, .off = F(lc, ctvd),
     .def = "f16", .help = "the draft model's V cache's type, as -ctkd's"},
    {.names = "--isa", .value = "avx512|avx2|neon|none", .kind = OPT_CHOICE, .off = F(lc, isa),
     .choices = "avx512|avx2|neon|none", .def = "this CPU's",
     .help = "the CPU llama.cpp runs on, for the weights it repacks"},
};
/* clang-format on */
#undef F

static const struct opt_group serving_group = OPT_GROUP("Serving, as hearth serve's", serving_list);
static const struct opt_group plan_group    = OPT_GROUP("Devices and output", plan_list);
static const struct opt_group llamacpp_group = OPT_GROUP("With --runtime llama.cpp", llamacpp_list);

/* clang-format off */
static const struct opt_use fit_uses[] = {
    {&serving_group, offsetof(struct fit_args, srv)},
    {&opts_threads, offsetof(struct fit_args, threads)},
    {&plan_group, offsetof(struct fit_args, plan)},
    {&llamacpp_group, offsetof(struct fit_args, lc)},
};
/* clang-format on */

static const struct fit_args fit_defaults = {
    .srv = {.ubatch = 512, .checkpoints = 8, .cache_ram = -1, .ctk = "f16", .ctv = "f16"},
    .lc  = {.batch = 2048, .flash_attn = FA_AUTO, .ctkd = "f16", .ctvd = "f16", .isa = ISA_HOST},
};

const struct cmd_spec cmd_fit_spec = {
    .name      = "fit",
    .synopsis  = "hearth fit MODEL [options]",
    .about     = "What `hearth serve MODEL` with the same options will hold in memory, per device, "
                 "read from the file's header alone (no tensor is read): weights, K/V (and the "
                 "prefix cache), compute buffers, logits, the rest; what is left free; and the "
                 "layers each device runs.",
    .uses      = fit_uses,
    .n_uses    = sizeof fit_uses / sizeof fit_uses[0],
    .pos_min   = 1,
    .pos_max   = 1,
    .pos_off   = offsetof(struct fit_args, pos),
    .defaults  = &fit_defaults,
    .args_size = sizeof(struct fit_args),
};

#define MIB(x) ((double)(x) / (1 << 20))

static void print_table(const struct fit_params *p, const struct fit_plan *pl)
{
    if (p->runtime == FIT_LLAMACPP)
        printf("llama.cpp: context %d tokens for %d slots (%d cells a stream, %s), micro-batch "
               "%d, K/V %s/%s, flash attention %s, prompt cache %.1f MiB\n",
               pl->n_ctx, p->n_parallel, pl->n_ctx_seq,
               p->lc.unified ? "one stream" : "a stream each", p->n_ubatch,
               dtype_name(p->lc.type_k), dtype_name(p->lc.type_v), p->lc.flash_attn ? "on" : "off",
               MIB(p->cache_ram > 0 ? p->cache_ram : 0));
    else
        printf("context %d tokens x %d slots, micro-batch %d, K/V %s/%s, prefix cache %.1f MiB\n",
               pl->n_ctx, p->n_parallel, p->n_ubatch, hearth_kv_type_name(p->kv_type),
               hearth_kv_type_name(p->kv_type_v), MIB(p->cache_ram > 0 ? p->cache_ram : 0));
    printf("%-10s %10s %10s %10s %10s %10s %10s %10s %10s %10s  %s\n", "device", "capacity",
           "weights", "kv", "compute", "output", "other", "total", "free", "floor", "layers");
    for (int32_t i = 0; i < pl->n_dev; i++) {
        const struct fit_use *u = &pl->use[i];
        char layers[64];
        if (u->l1 > u->l0)
            snprintf(layers, sizeof layers, "%d-%d%s", u->l0, u->l1 - 1,
                     u->output ? " + output" : "");
        else
            snprintf(layers, sizeof layers, "%s", u->output ? "output" : "-");
        printf("%-10s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f  %s\n",
               u->dev.name, MIB(u->dev.capacity), MIB(u->mem.b[MEM_WEIGHTS]), MIB(u->mem.b[MEM_KV]),
               MIB(u->mem.b[MEM_COMPUTE]), MIB(u->mem.b[MEM_OUTPUT]), MIB(u->mem.b[MEM_OTHER]),
               MIB(mem_acct_total(&u->mem)), (double)u->free / (1 << 20), MIB(p->floor), layers);
    }
    printf("(MiB) %s\n", pl->fits ? "fits" : pl->why);
}

static int print_json(const struct fit_params *p, const struct fit_plan *pl)
{
    cJSON *o = cJSON_CreateObject(), *devs = cJSON_AddArrayToObject(o, "devices");
    cJSON_AddStringToObject(o, "runtime", p->runtime == FIT_LLAMACPP ? "llama.cpp" : "hearth");
    cJSON_AddNumberToObject(o, "ctx_size", pl->n_ctx);
    cJSON_AddNumberToObject(o, "parallel", p->n_parallel);
    for (int32_t i = 0; i < pl->n_dev; i++) {
        const struct fit_use *u = &pl->use[i];
        cJSON *d                = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "name", u->dev.name);
        cJSON_AddNumberToObject(d, "capacity_bytes", (double)u->dev.capacity);
        cJSON_AddNumberToObject(d, "weights_bytes", (double)u->mem.b[MEM_WEIGHTS]);
        cJSON_AddNumberToObject(d, "kv_bytes", (double)u->mem.b[MEM_KV]);
        cJSON_AddNumberToObject(d, "compute_bytes", (double)u->mem.b[MEM_COMPUTE]);
        cJSON_AddNumberToObject(d, "output_bytes", (double)u->mem.b[MEM_OUTPUT]);
        cJSON_AddNumberToObject(d, "other_bytes", (double)u->mem.b[MEM_OTHER]);
        cJSON_AddNumberToObject(d, "total_bytes", (double)mem_acct_total(&u->mem));
        cJSON_AddNumberToObject(d, "free_bytes", (double)u->free);
        cJSON *layers = cJSON_AddArrayToObject(d, "layers");
        for (int32_t l = u->l0; l < u->l1; l++)
            cJSON_AddItemToArray(layers, cJSON_CreateNumber(l));
        cJSON_AddBoolToObject(d, "output", u->output);
        cJSON_AddItemToArray(devs, d);
    }
    cJSON_AddBoolToObject(o, "fits", pl->fits);
    if (!pl->fits)
        cJSON_AddStringToObject(o, "reason", pl->why);
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    if (!s)
        return EXIT_RUNTIME;
    puts(s);
    free(s);
    return EXIT_OK;
}

/* llama.cpp's K/V cache types (common/arg.cpp's list). */
static bool llamacpp_cache_type(const char *opt, const char *v, enum dtype *t)
{
    static const enum dtype types[] = {DTYPE_F32,  DTYPE_F16,    DTYPE_BF16, DTYPE_Q8_0, DTYPE_Q4_0,
                                       DTYPE_Q4_1, DTYPE_IQ4_NL, DTYPE_Q5_0, DTYPE_Q5_1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(v, dtype_name(types[i]))) {
            *t = types[i];
            return true;
        }
    fprintf(stderr,
            "hearth fit: %s takes f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1 with "
            "--runtime llama.cpp, got '%s'\n",
            opt, v);
    return false;
}

/* hearth's K/V cache types, as serve takes them (-ctv: no q4_0). */
static bool hearth_cache_type(const char *opt, const char *v, bool is_v, enum hearth_kv_type *t)
{
    if (hearth_kv_type_parse(v, t) && !(is_v && *t == HEARTH_KV_Q4_0))
        return true;
    fprintf(stderr, "hearth fit: %s takes %s, got '%s'\n", opt,
            is_v ? "f16, f32 or q8_0" : "f16, f32, q8_0 or q4_0", v);
    return false;
}

/* "name:bytes" into d; false with a usage message. */
static bool parse_device(const char *v, struct fit_device *d)
{
    const char *colon = strrchr(v, ':');
    int64_t bytes;
    if (!colon || colon == v || (size_t)(colon - v) >= sizeof d->name) {
        fprintf(stderr, "hearth fit: --device expects NAME:BYTES (ram:16G, gpu0:8G), got '%s'\n",
                v);
        return false;
    }
    if (!arg_bytes("fit", "--device", colon + 1, &bytes))
        return false;
    memset(d, 0, sizeof *d);
    memcpy(d->name, v, (size_t)(colon - v));
    d->capacity = (uint64_t)bytes;
    d->host     = !strcmp(d->name, "ram");
    return true;
}

/*
 * The last option of llamacpp_list on a command line opts_parse took, as it
 * is spelt there, into spelt; false when none is.
 */
static bool llamacpp_flag_given(int argc, char **argv, char *spelt, size_t spelt_len)
{
    int last = 0;
    for (size_t k = 0; k < sizeof llamacpp_list / sizeof llamacpp_list[0]; k++) {
        const int at = opts_last(&cmd_fit_spec, argc, argv, llamacpp_list[k].names);
        last         = at > last ? at : last;
    }
    if (last)
        snprintf(spelt, spelt_len, "%.*s", (int)strcspn(argv[last], "="), argv[last]);
    return last > 0;
}

int cmd_fit(int argc, char **argv)
{
    struct fit_args a;
    const enum opts_status st = opts_parse(&cmd_fit_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    const bool llama    = a.plan.runtime == RUNTIME_LLAMACPP;
    struct fit_params p = {.model             = a.pos.v[0],
                           .draft             = a.srv.draft,
                           .n_ctx             = a.srv.n_ctx == CTX_MAX ? 0 : (int32_t)a.srv.n_ctx,
                           .ctx_max           = a.srv.n_ctx == CTX_MAX,
                           .n_parallel        = a.srv.parallel ? (int32_t)a.srv.parallel : 4,
                           .n_ubatch          = (int32_t)a.srv.ubatch,
                           .kv_block          = HEARTH_KV_BLOCK,
                           .cache_ram         = a.srv.cache_ram,
                           .n_threads         = (int)threads_or_default(&a.threads),
                           .n_state_snapshots = (int32_t)a.srv.checkpoints,
                           .floor             = (uint64_t)a.plan.floor,
                           .balance           = a.plan.balance};
    struct fit_device gpus[FIT_MAX_DEVICES];
    int32_t n_gpu  = 0;
    bool have_host = false;
    for (size_t i = 0; i < a.plan.devices.n; i++) {
        struct fit_device d;
        if (!parse_device(a.plan.devices.v[i], &d))
            return EXIT_USAGE;
        if (d.host) {
            if (have_host) {
                fprintf(stderr, "hearth fit: --device ram is given twice\n");
                return EXIT_USAGE;
            }
            p.dev[0]  = d;
            have_host = true;
        } else if (n_gpu == FIT_MAX_DEVICES - 1) {
            fprintf(stderr, "hearth fit: at most %d GPUs\n", FIT_MAX_DEVICES - 1);
            return EXIT_USAGE;
        } else {
            gpus[n_gpu++] = d;
        }
    }
    char flag[64];
    if (!llama && llamacpp_flag_given(argc, argv, flag, sizeof flag)) {
        fprintf(stderr, "hearth fit: %s is a llama.cpp flag: give --runtime llama.cpp\n", flag);
        return EXIT_USAGE;
    }
    if (llama) {
        p.runtime    = FIT_LLAMACPP;
        p.lc.unified = a.lc.unified || !a.srv.parallel; /* llama-server's auto: 4 on one stream */
        p.lc.n_batch = (int32_t)a.lc.batch;
        p.lc.flash_attn = a.lc.flash_attn != FA_OFF;
        p.lc.isa        = a.lc.isa == ISA_HOST ? llamacpp_isa_host() : isa_of[a.lc.isa];
        if (!llamacpp_cache_type("-ctk", a.srv.ctk, &p.lc.type_k) ||
            !llamacpp_cache_type("-ctv", a.srv.ctv, &p.lc.type_v) ||
            !llamacpp_cache_type("-ctkd", a.lc.ctkd, &p.lc_draft_k) ||
            !llamacpp_cache_type("-ctvd", a.lc.ctvd, &p.lc_draft_v))
            return EXIT_USAGE;
        if (p.cache_ram < 0)
            p.cache_ram = 8192ll << 20;
    } else if (!hearth_cache_type("-ctk", a.srv.ctk, false, &p.kv_type) ||
               !hearth_cache_type("-ctv", a.srv.ctv, true, &p.kv_type_v))
        return EXIT_USAGE;
    if (!have_host) {
        const uint64_t avail = host_mem_available();
        if (!avail) {
            fprintf(stderr, "hearth fit: cannot read MemAvailable; give --device ram:BYTES\n");
            return EXIT_RUNTIME;
        }
        p.dev[0] = (struct fit_device){.name = "ram", .capacity = avail, .host = true};
    }
    if (p.cache_ram < 0) /* serve's default: a quarter of the RAM free, none with a GPU */
        p.cache_ram = n_gpu ? 0 : (int64_t)(p.dev[0].capacity / 4);
    p.n_dev = 1 + n_gpu;
    memcpy(&p.dev[1], gpus, (size_t)n_gpu * sizeof gpus[0]);
    struct fit_plan plan;
    char err[HEARTH_ERR_MAX];
    if (fit_plan(&p, &plan, err, sizeof err) != HEARTH_OK) {
        /* the planner's sentences start with "fit: " for its library callers */
        fprintf(stderr, "hearth fit: %s\n", strncmp(err, "fit: ", 5) ? err : err + 5);
        return EXIT_RUNTIME;
    }
    const int rc = a.plan.json ? print_json(&p, &plan) : (print_table(&p, &plan), EXIT_OK);
    if (rc != EXIT_OK)
        return rc;
    if (a.plan.check && !plan.fits) {
        fprintf(stderr, "hearth fit: does not fit: %s\n", plan.why);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
