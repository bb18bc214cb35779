/*
 * cmd_fit.c: `hearth fit MODEL [...]`: what a serving configuration will
 * hold on each device, from the file's header alone (src/fit/fit.c), as a
 * table or JSON, and with --check an exit status a deployment's CI gates on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "fit/fit.h"

static void usage(FILE *fp)
{
    fprintf(fp, "usage: hearth fit MODEL [options]\n"
                "\n"
                "What `hearth serve MODEL` with the same options will hold in memory, per\n"
                "device, read from the file's header alone (no tensor is read): weights, K/V\n"
                "(and the prefix cache), compute buffers, logits, the rest; what is left free;\n"
                "and the layers each device runs.\n"
                "\n");
    static const char *const lines[][2] = {
        {"-c, --ctx-size N|max", "tokens per slot (default 4096, or the training context when"},
        {"", "smaller, as serve's);"},
        {"", "max: the largest whole number of K/V blocks that keeps every"},
        {"", "device above its floor, up to the training context"},
        {"-np, --parallel N", "slots (default 4)"},
        {"-ub, --ubatch-size N", "tokens per micro-batch (default 512)"},
        {"-t, --threads N", "threads (default: the CPUs this process may use)"},
        {"--cache-ram BYTES", "the prefix cache's cap beyond the slots (8G, 512M; default, as"},
        {"", "serve's: a quarter of the host's memory, 0 with a GPU)"},
        {"--ctx-checkpoints N", "recurrent models: state snapshots per slot (default 8)"},
        {"--model-draft FILE", "a draft model, run on the host"},
        {"--device NAME:BYTES", "a device and its memory; ram is the host (default: ram with"},
        {"", "the RAM free now), any other name a GPU, in order; repeatable"},
        {"--floor BYTES", "memory every device keeps free (default 0)"},
        {"--balance", "split the GPUs' layers so they keep equal free memory"},
        {"", "(default: in proportion to their memory)"},
        {"--check", "exit 1 with the reason when it does not fit"},
        {"--json", "print JSON (the fields README.md lists)"},
        {"--runtime NAME", "hearth (default), or llama.cpp: llama-server's CPU build with"},
        {"", "the same file, its flags meaning what llama-server's mean"},
        {"", "(below); the host alone"},
    };
    usage_lines(fp, 26, lines, sizeof lines / sizeof lines[0]);
    cache_types_usage(fp, 26);
    static const char *const llama[][2] = {
        {"-c, --ctx-size N|max", "the context every slot shares (default: training context)"},
        {"-np, --parallel N", "slots, a K/V stream each (default: 4 sharing one stream)"},
        {"-kvu, --kv-unified", "one K/V stream for every slot"},
        {"-b, --batch-size N", "logical batch (default 2048)"},
        {"-fa, --flash-attn X", "flash attention: on, off or auto (default; on for a CPU)"},
        {"-ctk, -ctv TYPE", "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1"},
        {"-ctkd, -ctvd TYPE", "the draft model's cache (default f16)"},
        {"--cache-ram BYTES", "the prompt cache's cap (default 8G, llama-server's 8192 MiB)"},
        {"--isa NAME", "the CPU, for the weights it repacks: avx512, avx2, neon or none"},
        {"", "(default: this one's)"},
    };
    fprintf(fp, "\nWith --runtime llama.cpp:\n");
    usage_lines(fp, 26, llama, sizeof llama / sizeof llama[0]);
}

#define MIB(x) ((double)(x) / (1 << 20))

static void print_table(const struct fit_params *p, const struct fit_plan *pl)
{
    if (p->runtime == FIT_LLAMACPP)
        printf("llama.cpp: context %d tokens for %d slots (%d cells a stream, %s), micro-batch "
               "%d, K/V %s/%s, flash attention %s, prompt cache %.1f MiB\n",
               pl->n_ctx, p->n_parallel, pl->n_ctx_seq, p->lc.unified ? "one stream" : "a stream each",
               p->n_ubatch, dtype_name(p->lc.type_k), dtype_name(p->lc.type_v),
               p->lc.flash_attn ? "on" : "off", MIB(p->cache_ram > 0 ? p->cache_ram : 0));
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
    static const enum dtype types[] = {DTYPE_F32,  DTYPE_F16,  DTYPE_BF16,   DTYPE_Q8_0, DTYPE_Q4_0,
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

int cmd_fit(int argc, char **argv)
{
    struct fit_params p = {
        .n_parallel = 4, .n_ubatch = 512, .kv_block = 32, .cache_ram = -1, .n_state_snapshots = 8};
    long n_ctx = 0, parallel = 4, ubatch = 512, threads = default_threads(), ckpt = 8;
    bool check = false, json = false, have_host = false, llama = false, have_np = false;
    const char *ctk = NULL, *ctv = NULL, *llama_only = NULL, *fa = "auto", *isa = NULL;
    const char *ctkd = NULL, *ctvd = NULL;
    long batch = 2048;
    struct cache_types ct = {0};
    struct fit_device gpus[FIT_MAX_DEVICES];
    int32_t n_gpu = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        }
#define VALUE()                                                                                    \
    if (!(v = arg_value("fit", argc, argv, &i)))                                                   \
    return EXIT_USAGE
#define LONG(var, lo, hi)                                                                          \
    do {                                                                                           \
        VALUE();                                                                                   \
        if (!arg_long("fit", a, v, lo, hi, &var))                                                  \
            return EXIT_USAGE;                                                                     \
    } while (0)
        if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            VALUE();
            if (!strcmp(v, "max"))
                p.ctx_max = true;
            else if (!arg_long("fit", a, v, 1, 1 << 24, &n_ctx))
                return EXIT_USAGE;
        } else if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) {
            LONG(parallel, 1, 4096);
            have_np = true;
        } else if (!strcmp(a, "--runtime")) {
            VALUE();
            if (!strcmp(v, "llama.cpp"))
                llama = true;
            else if (!strcmp(v, "hearth"))
                llama = false;
            else {
                fprintf(stderr, "hearth fit: --runtime takes hearth or llama.cpp, got '%s'\n", v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "-kvu") || !strcmp(a, "--kv-unified")) {
            p.lc.unified = true;
            llama_only   = a;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            LONG(batch, 1, 1 << 20);
            llama_only = a;
        } else if (!strcmp(a, "-fa") || !strcmp(a, "--flash-attn")) {
            VALUE();
            if (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "auto")) {
                fprintf(stderr, "hearth fit: %s takes on, off or auto, got '%s'\n", a, v);
                return EXIT_USAGE;
            }
            fa         = v;
            llama_only = a;
        } else if (!strcmp(a, "-ctkd") || !strcmp(a, "--cache-type-k-draft") ||
                   !strcmp(a, "-ctvd") || !strcmp(a, "--cache-type-v-draft")) {
            VALUE();
            *(!strcmp(a, "-ctvd") || !strcmp(a, "--cache-type-v-draft") ? &ctvd : &ctkd) = v;
            llama_only                                                                   = a;
        } else if (!strcmp(a, "--isa")) {
            VALUE();
            isa        = v;
            llama_only = a;
        } else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size"))
            LONG(ubatch, 1, 65536);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            LONG(threads, 1, 1024);
        else if (!strcmp(a, "--ctx-checkpoints"))
            LONG(ckpt, 0, 1024);
        else if (!strcmp(a, "--cache-ram")) {
            VALUE();
            if (!arg_bytes("fit", a, v, &p.cache_ram))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--floor")) {
            int64_t f;
            VALUE();
            if (!arg_bytes("fit", a, v, &f))
                return EXIT_USAGE;
            p.floor = (uint64_t)f;
        } else if (!strcmp(a, "--model-draft") || !strcmp(a, "-md")) {
            VALUE();
            p.draft = v;
        } else if (!strcmp(a, "--device")) {
            struct fit_device d;
            VALUE();
            if (!parse_device(v, &d))
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
        } else if (cache_types_opt(a)) {
            VALUE();
            *(!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v") ? &ctv : &ctk) = v;
        } else if (!strcmp(a, "--balance"))
            p.balance = true;
        else if (!strcmp(a, "--check"))
            check = true;
        else if (!strcmp(a, "--json"))
            json = true;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "hearth fit: unknown option %s (hearth fit --help)\n", a);
            return EXIT_USAGE;
        } else if (!p.model)
            p.model = a;
        else {
            fprintf(stderr, "hearth fit: one model, got '%s' as well (hearth fit --help)\n", a);
            return EXIT_USAGE;
        }
#undef LONG
#undef VALUE
    }
    if (!p.model) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (llama_only && !llama) {
        fprintf(stderr, "hearth fit: %s is a llama.cpp flag: give --runtime llama.cpp\n",
                llama_only);
        return EXIT_USAGE;
    }
    if (llama) {
        p.runtime       = FIT_LLAMACPP;
        p.lc.n_batch    = (int32_t)batch;
        p.lc.flash_attn = strcmp(fa, "off") != 0;
        p.lc.type_k = p.lc.type_v = DTYPE_F16;
        p.lc_draft_k = p.lc_draft_v = DTYPE_F16;
        if ((ctk && !llamacpp_cache_type("-ctk", ctk, &p.lc.type_k)) ||
            (ctv && !llamacpp_cache_type("-ctv", ctv, &p.lc.type_v)) ||
            (ctkd && !llamacpp_cache_type("-ctkd", ctkd, &p.lc_draft_k)) ||
            (ctvd && !llamacpp_cache_type("-ctvd", ctvd, &p.lc_draft_v)))
            return EXIT_USAGE;
        if (!have_np) /* llama-server's auto: 4 slots on one stream */
            p.lc.unified = true;
        if (!isa)
            p.lc.isa = llamacpp_isa_host();
        else if (!strcmp(isa, "avx512"))
            p.lc.isa = LLAMACPP_ISA_AVX512;
        else if (!strcmp(isa, "avx2"))
            p.lc.isa = LLAMACPP_ISA_AVX2;
        else if (!strcmp(isa, "neon"))
            p.lc.isa = LLAMACPP_ISA_NEON;
        else if (!strcmp(isa, "none"))
            p.lc.isa = LLAMACPP_ISA_NONE;
        else {
            fprintf(stderr, "hearth fit: --isa takes avx512, avx2, neon or none, got '%s'\n", isa);
            return EXIT_USAGE;
        }
        if (p.cache_ram < 0)
            p.cache_ram = 8192ll << 20;
    } else if ((ctk && !cache_types_set("fit", "-ctk", ctk, &ct)) ||
               (ctv && !cache_types_set("fit", "-ctv", ctv, &ct)))
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
    p.n_ctx             = (int32_t)n_ctx;
    p.n_parallel        = (int32_t)parallel;
    p.n_ubatch          = (int32_t)ubatch;
    p.n_threads         = (int)threads;
    p.n_state_snapshots = (int32_t)ckpt;
    p.kv_type           = (enum hearth_kv_type)ct.k;
    p.kv_type_v         = (enum hearth_kv_type)ct.v;
    struct fit_plan plan;
    char err[HEARTH_ERR_MAX];
    if (fit_plan(&p, &plan, err, sizeof err) != HEARTH_OK) {
        /* the planner's sentences start with "fit: " for its library callers */
        fprintf(stderr, "hearth fit: %s\n", strncmp(err, "fit: ", 5) ? err : err + 5);
        return EXIT_RUNTIME;
    }
    const int rc = json ? print_json(&p, &plan) : (print_table(&p, &plan), EXIT_OK);
    if (rc != EXIT_OK)
        return rc;
    if (check && !plan.fits) {
        fprintf(stderr, "hearth fit: does not fit: %s\n", plan.why);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
