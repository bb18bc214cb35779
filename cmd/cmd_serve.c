/*
 * cmd_serve.c: `hearth serve`, the OpenAI-compatible HTTP server
 * (src/serve/http.c does the work; this file reads the options).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "cmd.h"
#include "fit/fit.h"

#define MIB(x) ((double)(x) / (1 << 20))
#include "hearth.h"
#include "serve/http.h"

static void usage(FILE *fp)
{
    fprintf(
        fp,
        "usage: hearth serve -m MODEL [options]\n"
        "  -m, --model FILE        GGUF model\n"
        "  -hf, --hf-repo ORG/REPO[:QUANT]  the model from the Hugging Face Hub, by way of\n"
        "                          the cache (as hearth pull; also ORG/REPO/FILE.gguf)\n"
        "  --offline               -hf from the cache only: never ask the network\n"
        "  --host H                address to listen on (default 127.0.0.1: this machine only)\n"
        "  --port P                TCP port (default 8080; 0 = any free port)\n"
        "  -np, --parallel N       slots: requests generated at the same time (default 4)\n"
        "  -c, --ctx-size C        context of EACH slot, in tokens (default 4096, or the\n"
        "                          model's training context when smaller, or the most that\n"
        "                          fits when that does not). Not divided among the slots as\n"
        "                          llama.cpp does: N slots hold N x C tokens. max: the most\n"
        "                          that fits in the RAM free (hearth fit). A configuration\n"
        "                          the RAM free cannot hold is refused before it loads.\n"
        "  -b, --batch-size B      most tokens one scheduler step takes (default 512)\n"
        "  -ub, --ubatch-size U    most tokens one forward pass takes (default 512); a step\n"
        "                          is one forward pass, so it uses min(B, U)\n"
        "  -t, --threads T         threads for the forward pass (default: CPU count)\n");
    placement_usage(fp, 26);
    cache_types_usage(fp, 26);
    fprintf(
        fp,
        "  --max-queue N           requests waiting for a slot before 503 (default 64)\n"
        "  --ctx-checkpoints N     models with recurrent layers (qwen35moe): copies of a slot's\n"
        "                          state kept at KV block boundaries, so a prompt sharing a\n"
        "                          cached prefix resumes at the last one it covers instead of\n"
        "                          at token 0; 0..1024 per slot (default 8, 0 = off). Memory:\n"
        "                          up to N x slots copies of one sequence's state (the DeltaNet\n"
        "                          layers' conv windows and matrices; the startup line says\n"
        "                          its size), touched only as they are taken\n"
        "  --spec LIST             speculative decoding: drafters propose tokens and the\n"
        "                          model verifies them in the step's one forward pass; the\n"
        "                          text is what plain decoding gives, at any temperature.\n"
        "                          ngram: prompt lookup (the slot's last tokens found earlier\n"
        "                          in it propose what followed); draft: --model-draft's greedy\n"
        "                          tokens; mtp: the model's own multi-token-prediction head\n"
        "                          (qwen35moe files with nextn layers; on the CPU);\n"
        "                          ngram,draft and ngram,mtp: the n-gram proposal when there\n"
        "                          is one, else the model drafter's (default: none)\n"
        "  --model-draft FILE      the draft model (same vocabulary; on the CPU); implies\n"
        "                          --spec draft unless --spec says otherwise\n"
        "  --draft-max N           most tokens drafted per slot and step, 1..64 (default 16\n"
        "                          with ngram alone, whose drafts cost nothing to make; 3\n"
        "                          when a model drafts, a forward of its own per token, or\n"
        "                          the model is recurrent, a state kept per drafted row);\n"
        "                          the depth follows each slot's recent acceptance\n"
        "  --draft-min N           fewer proposed than N: no drafting that step (default 1)\n"
        "  --spec-ngram-min N      the shortest n-gram looked up (default 1)\n"
        "  --spec-ngram-max N      the longest (default 4, at most 16)\n"
        "  --spec-ngram-pool MIB   with ngram: a pool of n-gram statistics every request feeds,\n"
        "                          so a slot drafts from text other requests saw, where it\n"
        "                          matches more than the slot's own text (default 16, 0 = none)\n"
        "  --cache-ram SIZE        memory for the prefix cache on top of the slots' K/V: the\n"
        "                          finished requests' prompts kept (longest prefix reused,\n"
        "                          least recently used dropped first), as 8G or 512M\n"
        "                          (default: a quarter of the RAM free at start; with\n"
        "                          layers on a GPU 0); 0: only what the idle slots' blocks\n"
        "                          hold\n"
        "  --cache-dir DIR         the prefix cache's disk tier: blocks dropped from memory\n"
        "                          are written to DIR (made when missing) and read back on a\n"
        "                          hit; at shutdown the cached blocks are written too, so a\n"
        "                          restart with the same DIR starts warm\n"
        "  --cache-disk SIZE       its cap, as 20G (default: a quarter of the space free\n"
        "                          there at start)\n"
        "  --reply-tokens own|text a prompt that resends a reply of this server as text\n"
        "                          goes on from the tokens the model generated (own, the\n"
        "                          default: the reply's cached K/V is reused, the text is\n"
        "                          the same byte for byte), or is tokenized afresh (text, as\n"
        "                          llama-server and vLLM do: a reply whose tokens are not\n"
        "                          the tokenizer's split of its text is computed again)\n"
        "  --slot-save-path DIR    POST /slots/{id}?action=save|restore with {\"filename\":\n"
        "                          NAME} writes or reads a slot's conversation (its tokens\n"
        "                          and K/V) as DIR/NAME (default: none, so a 501)\n"
        "  --max-body BYTES        largest request body; larger gets 413 (default 4194304)\n"
        "  --api-key KEY           require 'Authorization: Bearer KEY' (or 'x-api-key: KEY')\n"
        "                          on every endpoint but /health and the chat page /\n"
        "                          (default: $HEARTH_API_KEY, else none)\n"
        "  --alias NAME            model name in /v1/models and responses (default: the\n"
        "                          file name without .gguf)\n"
        "  -s, --seed N            the sampling seed of a request that gives none, so\n"
        "                          unseeded sampling repeats (default -1: a fresh one each)\n"
        "  --chat-template-file F  render chats with the Jinja template in F instead of the\n"
        "                          model's own tokenizer.chat_template\n"
        "  --chat-template NAME    a built-in template instead: chatml, llama2, llama3,\n"
        "                          mistral, gemma, phi3 (the fallback for files without one)\n"
        "  --chat-template-kwargs JSON  default template variables, e.g.\n"
        "                          '{\"enable_thinking\": false}'; a request's\n"
        "                          chat_template_kwargs add to them\n"
        "  --cors-origin ORIGIN    answer browsers from ORIGIN ('*' for any) with CORS headers\n"
        "  --no-webui              no chat page at / (it is on by default: open\n"
        "                          http://HOST:PORT/ in a browser)\n"
        "\n"
        "Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models (also\n"
        "without /v1), GET /health (503 while the model loads), GET /metrics (Prometheus),\n"
        "GET /slots, POST /slots/{id}?action=save|restore|erase, GET /props,\n"
        "POST /apply-template, POST /tokenize, POST /detokenize,\n"
        "OpenAI's POST /v1/responses (stateless), and Anthropic's POST /v1/messages and\n"
        "POST /v1/messages/count_tokens; GET / is a chat page (not behind --api-key: it asks\n"
        "for the key when the server wants one).\n"
        "Constrained output: response_format json_object / json_schema, llama.cpp's\n"
        "json_schema and grammar (GBNF), and tool_choice \"required\" or a named function\n"
        "(calls in the template's own syntax, their arguments held to the parameters'\n"
        "schema); a schema or grammar hearth cannot hold a reply to is a 400.\n"
        "max_tokens above the room a slot has after the prompt is clamped to it; generation\n"
        "also ends when the slot's context is full (finish_reason \"length\").\n"
        "Stops on SIGINT or SIGTERM, after telling running requests.\n");
}

int cmd_serve(int argc, char **argv)
{
    const char *hf         = NULL;
    bool offline           = false;
    const char *model_path = NULL, *host = "127.0.0.1", *api_key = NULL, *alias = NULL;
    const char *tmpl_file = NULL, *tmpl_name = NULL, *tmpl_kwargs = NULL, *cors = NULL;
    struct placement place = {0};
    long port = 8080, parallel = 4, n_ctx = 0, batch = 512, ubatch = 512, threads = default_threads();
    long max_queue = 64, max_body = 4194304, checkpoints = 8, seed = -1;
    long draft_max = 0, draft_min = 1, ngram_min = 1, ngram_max = 4, pool_mib = 16;
    bool spec_ngram = false, spec_draft = false, spec_mtp = false, spec_set = false;
    const char *draft_path = NULL, *slot_dir = NULL, *cache_dir = NULL;
    int64_t cache_disk = -1; /* -1: not given */
    int64_t cache_ram = -1; /* -1: not given */
    bool ctx_max      = false;
    bool no_webui     = false;
    bool reply_text       = false; /* --reply-tokens text */
    struct cache_types ct = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        }
#define VALUE()                                                                                    \
    if (!(v = arg_value("serve", argc, argv, &i)))                                                 \
    return EXIT_USAGE
#define LONG(var, lo, hi)                                                                          \
    do {                                                                                           \
        VALUE();                                                                                   \
        if (!arg_long("serve", a, v, lo, hi, &var))                                                \
            return EXIT_USAGE;                                                                     \
    } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            VALUE();
            model_path = v;
        } else if (!strcmp(a, "-hf") || !strcmp(a, "--hf-repo")) {
            VALUE();
            hf = v;
        } else if (!strcmp(a, "--offline")) {
            offline = true;
        } else if (!strcmp(a, "--host")) {
            VALUE();
            host = v;
        } else if (!strcmp(a, "--port")) {
            LONG(port, 0, 65535);
        } else if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) {
            LONG(parallel, 1, 256);
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            VALUE();
            if (!strcmp(v, "max"))
                ctx_max = true;
            else if (!arg_long("serve", a, v, 16, 1 << 22, &n_ctx))
                return EXIT_USAGE;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            LONG(batch, 1, 1 << 16);
        } else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) {
            LONG(ubatch, 1, 1 << 16);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            LONG(threads, 1, 512);
        } else if (placement_opt(a)) {
            VALUE();
            if (!placement_set("serve", a, v, &place))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--max-queue")) {
            LONG(max_queue, 0, 1 << 20);
        } else if (!strcmp(a, "--ctx-checkpoints")) {
            LONG(checkpoints, 0, 1024);
        } else if (!strcmp(a, "--spec")) {
            VALUE();
            spec_set = true;
            if (!strcmp(v, "ngram") || !strcmp(v, "draft") || !strcmp(v, "ngram,draft") ||
                !strcmp(v, "mtp") || !strcmp(v, "ngram,mtp") || !strcmp(v, "none")) {
                spec_ngram = !strncmp(v, "ngram", 5);
                spec_draft = strstr(v, "draft") != NULL;
                spec_mtp   = strstr(v, "mtp") != NULL;
            } else {
                fprintf(stderr, "hearth serve: --spec takes ngram, draft, mtp, ngram,draft, "
                                "ngram,mtp or none, got '%s'\n", v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--model-draft") || !strcmp(a, "-md")) {
            VALUE();
            draft_path = v;
        } else if (!strcmp(a, "--draft-max")) {
            LONG(draft_max, 1, 64);
        } else if (!strcmp(a, "--draft-min")) {
            LONG(draft_min, 1, 64);
        } else if (!strcmp(a, "--spec-ngram-min")) {
            LONG(ngram_min, 1, 16);
        } else if (!strcmp(a, "--spec-ngram-max")) {
            LONG(ngram_max, 1, 16);
        } else if (!strcmp(a, "--spec-ngram-pool")) {
            LONG(pool_mib, 0, 1 << 16);
        } else if (cache_types_opt(a)) {
            VALUE();
            if (!cache_types_set("serve", a, v, &ct))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--cache-ram")) {
            VALUE();
            if (!arg_bytes("serve", a, v, &cache_ram))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--cache-dir")) {
            VALUE();
            cache_dir = v;
        } else if (!strcmp(a, "--cache-disk")) {
            VALUE();
            if (!arg_bytes("serve", a, v, &cache_disk))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--reply-tokens")) {
            VALUE();
            if (strcmp(v, "own") && strcmp(v, "text")) {
                fprintf(stderr, "hearth serve: --reply-tokens expects own or text, got '%s'\n", v);
                return EXIT_USAGE;
            }
            reply_text = !strcmp(v, "text");
        } else if (!strcmp(a, "--slot-save-path")) {
            VALUE();
            slot_dir = v;
        } else if (!strcmp(a, "--max-body")) {
            LONG(max_body, 1024, 1L << 30);
        } else if (!strcmp(a, "--api-key")) {
            VALUE();
            api_key = v;
        } else if (!strcmp(a, "--chat-template-file")) {
            VALUE();
            tmpl_file = v;
        } else if (!strcmp(a, "--chat-template")) {
            VALUE();
            tmpl_name = v;
        } else if (!strcmp(a, "--chat-template-kwargs")) {
            VALUE();
            tmpl_kwargs = v;
        } else if (!strcmp(a, "--cors-origin")) {
            VALUE();
            cors = v;
        } else if (!strcmp(a, "--no-webui")) {
            no_webui = true;
        } else if (!strcmp(a, "--alias")) {
            VALUE();
            alias = v;
        } else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
            LONG(seed, -1, LONG_MAX);
        } else {
            fprintf(stderr, "hearth serve: unknown option '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
#undef LONG
#undef VALUE
    }
    if (model_path && hf) {
        fprintf(stderr, "hearth serve: -m and -hf name two models; give one\n");
        return EXIT_USAGE;
    }
    if (!model_path && !hf) {
        fprintf(stderr, "hearth serve: needs -m MODEL or -hf ORG/REPO[:QUANT]\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (offline && !hf) {
        fprintf(stderr, "hearth serve: --offline goes with -hf\n");
        return EXIT_USAGE;
    }
    if (tmpl_file && tmpl_name) {
        fprintf(stderr, "hearth serve: --chat-template-file and --chat-template name two templates; "
                        "give one\n");
        return EXIT_USAGE;
    }
    if (draft_path && !spec_set)
        spec_draft = true;
    if (spec_draft && !draft_path) {
        fprintf(stderr, "hearth serve: --spec draft needs --model-draft FILE\n");
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
    char hf_path[4096];
    if (hf) { /* after the usage checks: a mistyped flag costs no download */
        const int rc = hub_model("serve", hf, offline ? HUB_OFFLINE : 0, hf_path, sizeof hf_path);
        if (rc)
            return rc;
        model_path = hf_path;
    }
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
        cache_disk = (int64_t)(free_b / 4);
        fprintf(stderr, "hearth serve: --cache-disk %.2f GiB (a quarter of the %.2f GiB free "
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
        const bool gpu = placement_uses_gpu(&place);
        const uint64_t avail = host_mem_available();
        cache_ram            = gpu ? 0 : (int64_t)(avail / 4);
        if (gpu)
            fprintf(stderr, "hearth serve: --cache-ram 0 (layers on a GPU): the prefix cache "
                            "keeps what the idle slots' K/V blocks hold\n");
        else
            fprintf(stderr, "hearth serve: --cache-ram %.2f GiB (a quarter of the %.2f GiB of "
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
        const int rc = fit_check(&fc, &n_ctx);
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
        .api_key              = api_key,
        .cors_origin          = cors,
        .chat_template_file   = tmpl_file,
        .chat_template        = tmpl_name,
        .chat_template_kwargs = tmpl_kwargs,
        .n_gpu_layers         = (int32_t)place.ngl,
        .devices              = place.devices,
        .tensor_split         = place.tensor_split,
        .layer_split          = place.layer_split,
        .draft_path           = draft_path,
        .slot_save_path       = slot_dir,
        .no_webui             = no_webui,
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
