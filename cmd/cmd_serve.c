/*
 * cmd_serve.c: `hearth serve`, the OpenAI-compatible HTTP server
 * (src/serve/http.c does the work; this file reads the options).
 */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "cmd.h"
#include "fit/fit.h"

#define MIB(x) ((double)(x) / (1 << 20))
#include "hearth.h"
#include "opts.h"
#include "serve/http.h"

/* --spec's values, in the order of its choices; SPEC_UNSET: not given */
enum {
    SPEC_UNSET = -1,
    SPEC_NGRAM,
    SPEC_DRAFT,
    SPEC_MTP,
    SPEC_NGRAM_DRAFT,
    SPEC_NGRAM_MTP,
    SPEC_EAGLE3,
    SPEC_EAGLE3_NGRAM,
    SPEC_DFLASH,
    SPEC_DFLASH_NGRAM,
    SPEC_NONE
};

struct serve_args {
    struct model_args model;
    struct {
        const char *host, *api_key, *alias, *cors;
        long port, max_body, max_queue;
        float timeout_s;
        bool no_webui;
        long threads_http, health_stall;
    } srv;
    struct {
        long parallel, n_ctx, batch, ubatch, checkpoints, seed; /* n_ctx 0: default; CTX_MAX */
    } slots;
    struct {
        const char *file, *name, *kwargs;
    } tmpl;
    struct {
        long n_predict; /* -1: no cap */
        bool strict;
        const char *tool_choice;
        struct opt_multi bias; /* --logit-bias TOKEN(+|-)BIAS, each */
    } req;
    struct {
        int64_t ram, disk; /* -1: not given */
        const char *dir, *slot_dir;
        int reply; /* 0 own, 1 text */
    } cache;
    struct {
        int spec; /* SPEC_* */
        const char *draft;
        long draft_max, draft_min, ngram_min, ngram_max, pool_mib;
    } spec;
    struct thread_args threads;
    struct placement place;
    struct cache_types ct;
    struct {
        bool jinja, metrics, cont_batching;
        int flash_attn;
    } compat;
};

#define F(g, f) offsetof(struct serve_args, g.f) - offsetof(struct serve_args, g)
/* clang-format off */
static const struct opt server_list[] = {
    {.names = "--host", .value = "H", .kind = OPT_STR, .off = F(srv, host), .def = "127.0.0.1",
     .help = "the address to listen on; the default is this machine only"},
    {.names = "--port", .value = "P", .kind = OPT_LONG, .off = F(srv, port), .lo = 0, .hi = 65535,
     .def = "8080", .help = "the TCP port; 0: any free port"},
    {.names = "--api-key", .value = "KEY", .kind = OPT_STR, .off = F(srv, api_key),
     .def = "$HEARTH_API_KEY, else none",
     .help = "require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on every endpoint but "
             "/health and the chat page /"},
    {.names = "--alias -a", .value = "NAME", .kind = OPT_STR, .off = F(srv, alias),
     .def = "the file name without .gguf",
     .help = "the model's name in /v1/models and in responses"},
    {.names = "--max-body", .value = "BYTES", .kind = OPT_LONG, .off = F(srv, max_body), .lo = 1024,
     .hi = 1L << 30, .def = "4194304", .help = "the largest request body; a larger one gets 413"},
    {.names = "-to --timeout", .value = "S", .kind = OPT_FLOAT, .off = F(srv, timeout_s),
     .lo = 0.001, .hi = 1e6, .def = "600",
     .help = "seconds a connection may be silent while it sends a request or between requests, "
             "or leave a reply unread, before it is closed; a request's line and headers get "
             "the smaller of this and 30 s (a slow head is an attack, a slow body a big upload). "
             "A reply still being generated is not a silence"},
    {.names = "--max-queue", .value = "N", .kind = OPT_LONG, .off = F(srv, max_queue), .lo = 0,
     .hi = 1 << 20, .def = "64", .help = "requests waiting for a slot before a 503"},
    {.names = "--cors-origin", .value = "ORIGIN", .kind = OPT_STR, .off = F(srv, cors),
     .help = "answer browsers from ORIGIN ('*' for any) with CORS headers"},
    {.names = "--no-webui", .kind = OPT_FLAG, .off = F(srv, no_webui),
     .help = "no chat page at / (it is on by default: open http://HOST:PORT/ in a browser)"},
    {.names = "--threads-http", .value = "N", .kind = OPT_LONG, .off = F(srv, threads_http),
     .lo = 1, .hi = 64, .def = "4",
     .help = "preparation workers: each renders a request's chat template, tokenizes it and "
             "compiles its grammar, one request at a time, so a slow one holds back only its "
             "worker; when all are busy requests wait their turn"},
    {.names = "--health-stall", .value = "SECONDS", .kind = OPT_LONG, .off = F(srv, health_stall),
     .lo = 0, .hi = 86400, .def = "60",
     .help = "/health answers 503 while every preparation worker has been busy this long, or "
             "the scheduler has been inside one step this long, so a router stops sending "
             "here; 0: as soon as they are busy"},
};
/* clang-format on */

/* clang-format off */
static const struct opt slots_list[] = {
    {.names = "-np --parallel", .value = "N", .kind = OPT_LONG, .off = F(slots, parallel), .lo = 1,
     .hi = 256, .def = "4", .help = "slots: requests generated at the same time"},
    {.names = "-c --ctx-size", .value = "N|max", .kind = OPT_LONG, .off = F(slots, n_ctx), .lo = 16,
     .hi = 1 << 22, .choices = "max", .word_value = CTX_MAX,
     .def = "4096, or the model's training context when smaller, or the most that fits when that "
            "does not",
     .help = "the context of EACH slot, in tokens: not divided among the slots as llama.cpp does, "
             "so N slots hold N x C tokens. max: the most that fits in the RAM free (hearth fit). "
             "A configuration the RAM free cannot hold is refused before it loads"},
    {.names = "-b --batch-size", .value = "N", .kind = OPT_LONG, .off = F(slots, batch), .lo = 1,
     .hi = 1 << 16, .def = "512", .help = "the most tokens one scheduler step takes"},
    {.names = "-ub --ubatch-size", .value = "N", .kind = OPT_LONG, .off = F(slots, ubatch), .lo = 1,
     .hi = 1 << 16, .def = "512",
     .help = "the most tokens one forward pass takes; a step is one forward pass, so it uses the "
             "smaller of -b and -ub"},
    {.names = "--ctx-checkpoints --swa-checkpoints", .value = "N", .kind = OPT_LONG,
     .off = F(slots, checkpoints), .lo = 0, .hi = 1024, .def = "8",
     .help = "models with recurrent layers (qwen35moe): copies of a slot's state kept at K/V block "
             "boundaries, so a prompt sharing a cached prefix resumes at the last one it covers "
             "instead of at token 0; 0 is off. Memory: up to N x slots copies of one sequence's "
             "state (the startup line says its size), touched only as they are taken"},
    {.names = "-s --seed", .value = "N", .kind = OPT_LONG, .off = F(slots, seed), .lo = -1,
     .hi = (double)LONG_MAX, .def = "-1",
     .help = "the sampling seed of a request that gives none, so unseeded sampling repeats; -1: a "
             "fresh one each"},
};
/* clang-format on */

/* clang-format off */
static const struct opt tmpl_list[] = {
    {.names = "--chat-template-file", .value = "FILE", .kind = OPT_STR, .off = F(tmpl, file),
     .help = "render chats with the Jinja template in FILE instead of the model's own "
             "tokenizer.chat_template"},
    {.names = "--chat-template", .value = "NAME", .kind = OPT_STR, .off = F(tmpl, name),
     .help = "a built-in template instead: chatml, llama2, llama3, mistral, gemma, phi3 (the "
             "fallback for files without one)"},
    {.names = "--chat-template-kwargs", .value = "JSON", .kind = OPT_STR, .off = F(tmpl, kwargs),
     .help = "default template variables, as '{\"enable_thinking\": false}'; a request's "
             "chat_template_kwargs add to them"},
};
/* clang-format on */

/* clang-format off */
static const struct opt req_list[] = {
    {.names = "-n --n-predict", .value = "N", .kind = OPT_LONG, .off = F(req, n_predict),
     .lo = -1, .hi = 1 << 30, .def = "-1",
     .help = "the most tokens any request generates (agents often ask for no limit, or 32000); "
             "a request asking for fewer gets fewer; -1 or 0: no cap"},
    {.names = "--strict-fields", .kind = OPT_FLAG, .off = F(req, strict),
     .help = "refuse (400) request fields the API does not define, as OpenAI and Anthropic do; "
             "by default they are accepted, logged once per name and counted in "
             "hearth_ignored_request_fields_total, as llama-server and vLLM do"},
    {.names = "-l --logit-bias", .value = "TOKEN(+|-)BIAS", .kind = OPT_MULTI,
     .off = F(req, bias),
     .help = "a bias added to a token's logit in every request, as llama-server's: "
             "'15043+1.5', '15043-1', '15043-inf' (banned); repeatable. A request's own "
             "logit_bias for the same token wins"},
    {.names = "--tool-choice", .value = "auto|required|none|NAME", .kind = OPT_STR,
     .off = F(req, tool_choice),
     .help = "the tool_choice of every request that offers tools and ends with the user's own "
             "turn (not a tool result), in place of the request's: 'required' or a function "
             "NAME makes an agent's turn start with a tool call, and its next request, carrying "
             "the result, is left as sent"},
};
/* clang-format on */

/* clang-format off */
static const struct opt cache_list[] = {
    {.names = "--cache-ram -cram", .value = "SIZE", .kind = OPT_BYTES, .off = F(cache, ram),
     .def = "a quarter of the RAM free at start; 0 with layers on a GPU",
     .help = "memory for the prefix cache on top of the slots' K/V, as 8G or 512M: finished "
             "conversations are kept, found again by their longest cached prefix and dropped least "
             "recently used first; 0: only what the idle slots' blocks hold"},
    {.names = "--cache-dir", .value = "DIR", .kind = OPT_STR, .off = F(cache, dir),
     .help = "the prefix cache's disk tier: blocks dropped from memory are written to DIR (made "
             "when missing) and read back on a hit; at shutdown the cached blocks are written too, "
             "so a restart with the same DIR starts warm"},
    {.names = "--cache-disk", .value = "SIZE", .kind = OPT_BYTES, .off = F(cache, disk),
     .def = "a quarter of the space free there at start", .help = "the disk tier's cap, as 20G"},
    {.names = "--reply-tokens", .value = "own|text", .kind = OPT_CHOICE, .off = F(cache, reply),
     .choices = "own|text", .def = "own",
     .help = "a prompt that resends a reply of this server as text goes on from the tokens the "
             "model generated (own: the reply's cached K/V is reused, the text is the same byte "
             "for byte), or is tokenized afresh (text, as llama-server and vLLM do)"},
    {.names = "--slot-save-path", .value = "DIR", .kind = OPT_STR, .off = F(cache, slot_dir),
     .def = "none, so a 501",
     .help = "POST /slots/{id}?action=save|restore with {\"filename\": NAME} writes or reads a "
             "slot's conversation (its tokens and K/V) as DIR/NAME"},
};
/* clang-format on */

/* clang-format off */
static const struct opt spec_list[] = {
    {.names = "--spec", .value = "LIST", .kind = OPT_CHOICE, .off = F(spec, spec),
     .choices = "ngram|draft|mtp|ngram,draft|ngram,mtp|eagle3|eagle3,ngram|dflash|dflash,ngram|"
                "none",
     .def = "none, or draft with --model-draft",
     .help = "speculative decoding: drafters propose tokens and the model verifies them in the "
             "step's one forward pass; the text is what plain decoding gives, at any temperature. "
             "ngram: prompt lookup (the slot's last tokens found earlier in it propose what "
             "followed); draft: --model-draft's greedy tokens; mtp: the model's own "
             "multi-token-prediction head (qwen35moe files with nextn layers; on the CPU); "
             "eagle3 and dflash: the block drafters (--model-draft an EAGLE-3 or DFlash file made "
             "for this model, which read its hidden states; on the CPU); "
             "ngram,draft, ngram,mtp, eagle3,ngram and dflash,ngram: the n-gram proposal when "
             "there is one, else the model drafter's"},
    {.names = "-md --model-draft", .value = "FILE", .kind = OPT_STR, .off = F(spec, draft),
     .help = "the draft model (the same vocabulary; on the CPU); implies --spec draft unless "
             "--spec says otherwise"},
    {.names = "--draft-max --draft --draft-n", .value = "N", .kind = OPT_LONG,
     .off = F(spec, draft_max), .lo = 1, .hi = 64,
     .def = "16 with ngram alone; 3 when a model drafts or the model is recurrent",
     .help = "the most tokens drafted per slot and step; the depth follows each slot's recent "
             "acceptance"},
    {.names = "--draft-min --draft-n-min", .value = "N", .kind = OPT_LONG,
     .off = F(spec, draft_min), .lo = 1, .hi = 64, .def = "1",
     .help = "fewer proposed than N: no drafting that step"},
    {.names = "--spec-ngram-min", .value = "N", .kind = OPT_LONG, .off = F(spec, ngram_min),
     .lo = 1, .hi = 16, .def = "1", .help = "the shortest n-gram looked up"},
    {.names = "--spec-ngram-max", .value = "N", .kind = OPT_LONG, .off = F(spec, ngram_max),
     .lo = 1, .hi = 16, .def = "4", .help = "the longest n-gram looked up"},
    {.names = "--spec-ngram-pool", .value = "MIB", .kind = OPT_LONG, .off = F(spec, pool_mib),
     .lo = 0, .hi = 1 << 16, .def = "16",
     .help = "with ngram: a pool of n-gram statistics every request feeds, so a slot drafts from "
             "text other requests saw where it matches more than the slot's own text; 0: none"},
};
/* clang-format on */

/* clang-format off */
static const struct opt compat_list[] = {
    {.names = "--jinja", .kind = OPT_FLAG, .off = F(compat, jinja),
     .help = "accepted for llama-server's command lines: hearth always renders the model's Jinja "
             "template"},
    {.names = "--metrics", .kind = OPT_FLAG, .off = F(compat, metrics),
     .help = "accepted for llama-server's command lines: GET /metrics is always on"},
    {.names = "-cb --cont-batching", .kind = OPT_FLAG, .off = F(compat, cont_batching),
     .help = "accepted for llama-server's command lines: batching is always continuous"},
    {.names = "-fa --flash-attn", .value = "on|off|auto", .kind = OPT_CHOICE,
     .off = F(compat, flash_attn), .choices = "auto|on|off", .def = "auto",
     .help = "accepted for llama-server's command lines: hearth's attention is always fused, with "
             "llama.cpp's flash-attention arithmetic for quantized K/V"},
};
/* clang-format on */
#undef F

static const struct opt_group server_group = OPT_GROUP("Server", server_list);
static const struct opt_group slots_group  = OPT_GROUP("Slots and context", slots_list);
static const struct opt_group tmpl_group   = OPT_GROUP("Chat template", tmpl_list);
static const struct opt_group req_group    = OPT_GROUP("Requests", req_list);
static const struct opt_group cache_group  = OPT_GROUP("Prompt cache", cache_list);
static const struct opt_group spec_group   = OPT_GROUP("Speculative decoding", spec_list);
static const struct opt_group compat_group = OPT_GROUP("llama-server compatibility", compat_list);

/* clang-format off */
static const struct opt_use serve_uses[] = {
    {&opts_model, offsetof(struct serve_args, model)},
    {&server_group, offsetof(struct serve_args, srv)},
    {&slots_group, offsetof(struct serve_args, slots)},
    {&opts_threads, offsetof(struct serve_args, threads)},
    {&opts_placement, offsetof(struct serve_args, place)},
    {&opts_cache_types, offsetof(struct serve_args, ct)},
    {&cache_group, offsetof(struct serve_args, cache)},
    {&tmpl_group, offsetof(struct serve_args, tmpl)},
    {&req_group, offsetof(struct serve_args, req)},
    {&spec_group, offsetof(struct serve_args, spec)},
    {&compat_group, offsetof(struct serve_args, compat)},
};
/* clang-format on */

static const struct serve_args serve_defaults = {
    .srv   = {.host         = "127.0.0.1",
              .port         = 8080,
              .max_body     = 4194304,
              .max_queue    = 64,
              .timeout_s    = 600,
              .threads_http = 4,
              .health_stall = 60},
    .slots = {.parallel = 4, .batch = 512, .ubatch = 512, .checkpoints = 8, .seed = -1},
    .cache = {.ram = -1, .disk = -1},
    .req   = {.n_predict = -1},
    .spec  = {.spec = SPEC_UNSET, .draft_min = 1, .ngram_min = 1, .ngram_max = 4, .pool_mib = 16},
};

const struct cmd_spec cmd_serve_spec = {
    .name     = "serve",
    .synopsis = "hearth serve -m MODEL [options]\nhearth serve -hf ORG/REPO[:QUANT] [options]",
    .about    = "An OpenAI-, Anthropic- and Responses-compatible HTTP server with the model's own "
                "chat template, tool calls, reasoning, grammars and schemas, a prompt cache and "
                "speculative decoding; GET / is a chat page.",
    .epilog   = "Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models (also\n"
                "without /v1), GET /health (503 while the model loads), GET /metrics (Prometheus),\n"
                "GET /slots, POST /slots/{id}?action=save|restore|erase, GET /props,\n"
                "POST /apply-template, POST /tokenize, POST /detokenize,\n"
                "OpenAI's POST /v1/responses (stateless), and Anthropic's POST /v1/messages and\n"
                "POST /v1/messages/count_tokens; GET / is a chat page (not behind --api-key: it\n"
                "asks for the key when the server wants one). docs/serve.md says what each does.\n"
                "Stops on SIGINT or SIGTERM, after telling running requests.\n",
    .uses     = serve_uses,
    .n_uses   = sizeof serve_uses / sizeof serve_uses[0],
    .defaults = &serve_defaults,
    .args_size = sizeof(struct serve_args),
};

/* One --logit-bias: TOKEN then a signed BIAS ("15043+1.5", "15043-inf"), llama-server's form;
 * false after one line on stderr. The token is checked against the vocabulary at load. */
static bool parse_bias(const char *v, struct sample_bias *out)
{
    char *end         = NULL;
    const long long t = strtoll(v, &end, 10);
    double b          = 0;
    if (end != v && t >= 0 && t <= INT32_MAX && (*end == '+' || *end == '-')) {
        const char *num = end;
        if (!strcmp(num + 1, "inf"))
            b = *num == '-' ? -INFINITY : 100;
        else
            b = strtod(num, &end);
        if (!strcmp(num + 1, "inf") || (end != num + 1 && !*end && isfinite(b))) {
            *out = (struct sample_bias){(hearth_token)t, b < -100  ? -INFINITY
                                                         : b > 100 ? 100
                                                                   : (float)b};
            return true;
        }
    }
    fprintf(stderr,
            "hearth serve: --logit-bias '%s': expected TOKEN+BIAS or TOKEN-BIAS, as "
            "15043+1.5 or 15043-inf\n",
            v);
    return false;
}

int cmd_serve(int argc, char **argv)
{
    struct serve_args a;
    const enum opts_status st = opts_parse(&cmd_serve_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    const char *host = a.srv.host, *api_key = a.srv.api_key, *alias = a.srv.alias;
    const char *cors = a.srv.cors, *tmpl_file = a.tmpl.file, *tmpl_name = a.tmpl.name;
    const char *tmpl_kwargs = a.tmpl.kwargs, *draft_path = a.spec.draft;
    const char *slot_dir = a.cache.slot_dir, *cache_dir = a.cache.dir;
    const long port = a.srv.port, max_body = a.srv.max_body, max_queue = a.srv.max_queue;
    const long parallel = a.slots.parallel, batch = a.slots.batch, ubatch = a.slots.ubatch;
    const long checkpoints = a.slots.checkpoints, seed = a.slots.seed;
    const long threads   = threads_or_default(&a.threads);
    const long draft_max = a.spec.draft_max, draft_min = a.spec.draft_min;
    const long ngram_min = a.spec.ngram_min, ngram_max = a.spec.ngram_max;
    const long pool_mib = a.spec.pool_mib;
    const bool ctx_max = a.slots.n_ctx == CTX_MAX, no_webui = a.srv.no_webui;
    const bool reply_text = a.cache.reply == 1;
    long n_ctx            = ctx_max ? 0 : a.slots.n_ctx;
    int64_t cache_ram = a.cache.ram, cache_disk = a.cache.disk;
    const struct placement place = a.place;
    const struct cache_types ct  = a.ct;
    const int spec               = a.spec.spec;
    const bool spec_ngram        = spec == SPEC_NGRAM || spec == SPEC_NGRAM_DRAFT ||
                            spec == SPEC_NGRAM_MTP || spec == SPEC_EAGLE3_NGRAM ||
                            spec == SPEC_DFLASH_NGRAM;
    const bool spec_mtp = spec == SPEC_MTP || spec == SPEC_NGRAM_MTP;
    /* a block drafter's file is no model of its own: the drafters open it, not the loader */
    const enum spec_block block =
        spec == SPEC_EAGLE3 || spec == SPEC_EAGLE3_NGRAM   ? SPEC_BLOCK_EAGLE3
        : spec == SPEC_DFLASH || spec == SPEC_DFLASH_NGRAM ? SPEC_BLOCK_DFLASH
                                                           : SPEC_BLOCK_NONE;
    const bool spec_draft = spec == SPEC_DRAFT || spec == SPEC_NGRAM_DRAFT ||
                            (spec == SPEC_UNSET && draft_path) || block != SPEC_BLOCK_NONE;
    if (model_args_check("serve", &a.model) != EXIT_OK)
        return EXIT_USAGE;
    struct sample_bias bias[OPT_MULTI_MAX];
    for (size_t i = 0; i < a.req.bias.n; i++)
        if (!parse_bias(a.req.bias.v[i], &bias[i]))
            return EXIT_USAGE;
    if (tmpl_file && tmpl_name) {
        fprintf(stderr,
                "hearth serve: --chat-template-file and --chat-template name two templates; "
                "give one\n");
        return EXIT_USAGE;
    }
    if (spec_draft && !draft_path) {
        fprintf(stderr, "hearth serve: --spec %s needs --model-draft FILE\n",
                block == SPEC_BLOCK_EAGLE3   ? "eagle3"
                : block == SPEC_BLOCK_DFLASH ? "dflash"
                                             : "draft");
        return EXIT_USAGE;
    }
    if (draft_path && !spec_draft) {
        fprintf(stderr, "hearth serve: --model-draft is given but --spec does not name draft\n");
        return EXIT_USAGE;
    }
    if ((draft_max && draft_min > draft_max) || ngram_min > ngram_max) {
        fprintf(stderr, "hearth serve: --draft-min is above --draft-max, or --spec-ngram-min "
                        "above --spec-ngram-max\n");
        return EXIT_USAGE;
    }
    struct stat sb;
    if (slot_dir && (stat(slot_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
        fprintf(stderr, "hearth serve: --slot-save-path %s is not a directory\n", slot_dir);
        return EXIT_USAGE;
    }
    if (cache_disk >= 0 && !cache_dir) {
        fprintf(stderr, "hearth serve: --cache-disk sizes the disk tier --cache-dir DIR makes; "
                        "give that too\n");
        return EXIT_USAGE;
    }
    /* after the usage checks: a mistyped flag costs no download */
    char model_path[4096];
    const int mrc = model_args_path("serve", &a.model, model_path, sizeof model_path);
    if (mrc != EXIT_OK)
        return mrc;
    if (cache_dir && cache_disk < 0) {
        struct statvfs fs;
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", cache_dir);
        bool ok = statvfs(parent, &fs) == 0;
        if (!ok) { /* not made yet: the directory it will be made in */
            char *slash = strrchr(parent, '/');
            if (slash == parent)
                slash[1] = 0;
            else if (slash)
                *slash = 0;
            else
                snprintf(parent, sizeof parent, ".");
            ok = statvfs(parent, &fs) == 0;
        }
        const uint64_t free_b = ok ? (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize : 0;
        cache_disk            = (int64_t)(free_b / 4);
        fprintf(stderr,
                "hearth serve: --cache-disk %.2f GiB (a quarter of the %.2f GiB free "
                "there)\n",
                (double)cache_disk / (1 << 30), (double)free_b / (1 << 30));
    }
    if (!api_key) {
        const char *env = getenv("HEARTH_API_KEY");
        if (env && *env)
            api_key = env;
    }
    if (cache_ram < 0) {
        /* K/V of layers on a GPU lives in its memory: a share of the host's free RAM says
         * nothing about what fits there, so the cache keeps to the slots' own blocks */
        const bool gpu       = placement_uses_gpu(&place);
        const uint64_t avail = host_mem_available();
        cache_ram            = gpu ? 0 : (int64_t)(avail / 4);
        if (gpu)
            fprintf(stderr, "hearth serve: --cache-ram 0 (layers on a GPU): the prefix cache "
                            "keeps what the idle slots' K/V blocks hold\n");
        else
            fprintf(stderr,
                    "hearth serve: --cache-ram %.2f GiB (a quarter of the %.2f GiB of "
                    "RAM free)\n",
                    (double)cache_ram / (1 << 30), (double)avail / (1 << 30));
    }
    if (!placement_uses_gpu(&place)) {
        const struct fit_check fc = {.cmd         = "serve",
                                     .model       = model_path,
                                     .draft       = draft_path,
                                     .ctx_max     = ctx_max,
                                     .parallel    = parallel,
                                     .ubatch      = batch < ubatch ? batch : ubatch,
                                     .threads     = threads,
                                     .checkpoints = checkpoints,
                                     .cache_ram   = cache_ram,
                                     .ct          = &ct,
                                     .extra       = spec_ngram ? (uint64_t)pool_mib << 20 : 0};
        const int rc              = fit_check(&fc, &n_ctx);
        if (rc != EXIT_OK)
            return rc;
    } else if (ctx_max) {
        fprintf(stderr, "hearth serve: --ctx-size max plans the host's memory only, and layers "
                        "go on a GPU here; give -c N (hearth fit --device says what fits)\n");
        return EXIT_USAGE;
    }
    char name[256];
    if (!alias) {
        const char *base = strrchr(model_path, '/');
        snprintf(name, sizeof name, "%.255s", base ? base + 1 : model_path);
        size_t n = strlen(name);
        if (n > 5 && !strcmp(name + n - 5, ".gguf"))
            name[n - 5] = 0;
        alias = name;
    }
    struct http_params p = {
        .model_path           = model_path,
        .alias                = alias,
        .host                 = host,
        .port                 = (int)port,
        .max_body             = (size_t)max_body,
        .timeout_s            = a.srv.timeout_s,
        .api_key              = api_key,
        .cors_origin          = cors,
        .chat_template_file   = tmpl_file,
        .chat_template        = tmpl_name,
        .chat_template_kwargs = tmpl_kwargs,
        .n_gpu_layers         = (int32_t)place.ngl,
        .devices              = place.devices,
        .tensor_split         = place.tensor_split,
        .layer_split          = place.layer_split,
        .draft_path           = block ? NULL : draft_path,
        .slot_save_path       = slot_dir,
        .no_webui             = no_webui,
        .strict_fields        = a.req.strict,
        .n_predict            = (int32_t)a.req.n_predict,
        .tool_choice          = a.req.tool_choice,
        .bias                 = bias,
        .n_bias               = (int32_t)a.req.bias.n,
        .n_prep_workers       = (int32_t)a.srv.threads_http,
        .health_stall_s       = (double)a.srv.health_stall,
        .seeded               = seed >= 0,
        .seed                 = seed >= 0 ? (uint64_t)seed : 0,
        .sched                = {.n_slots           = (int32_t)parallel,
                                 .n_ctx             = (int32_t)n_ctx,
                                 .n_batch           = (int32_t)(batch < ubatch ? batch : ubatch),
                                 .max_queue         = (int32_t)max_queue,
                                 .n_threads         = (int)threads,
                                 .n_state_snapshots = (int32_t)checkpoints,
                                 .cache_bytes       = cache_ram,
                                 .kv_type           = ct.k,
                                 .kv_type_v         = ct.v,
                                 .slot_files        = slot_dir != NULL,
                                 .reply_tokens      = !reply_text,
                                 .cache_dir         = cache_dir,
                                 .cache_disk_bytes  = cache_disk,
                                 .spec              = {.ngram            = spec_ngram,
                                                       .mtp              = spec_mtp,
                                                       .block            = block,
                                                       .block_path       = block ? draft_path : NULL,
                                                       .draft_max        = (int32_t)draft_max,
                                                       .draft_min        = (int32_t)draft_min,
                                                       .ngram_min        = (int32_t)ngram_min,
                                                       .ngram_max        = (int32_t)ngram_max,
                                                       .ngram_pool_bytes = (size_t)pool_mib << 20}},
    };
    char err[HEARTH_ERR_MAX] = "";
    if (http_serve(&p, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "hearth serve: %s\n", err[0] ? err : "failed");
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
