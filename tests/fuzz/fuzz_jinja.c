/*
 * fuzz_jinja.c: libFuzzer target for the Jinja interpreter, which compiles
 * chat templates that come inside GGUF files and requests. The input is the
 * template; it is compiled and, if that succeeds, rendered with a small
 * fixed conversation under tight bounds (so a slow input is an error, not a
 * timeout). Any status is fine; a crash, a leak or undefined behaviour is
 * the bug. Bytes after a NUL are JSON text given as the raw variable x
 * (jinja_json.c's parser). Seeds: tests/fuzz/corpus/jinja.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

static const char vars_json[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u4f60\\u597d \\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"hmm\","
    "  \"tool_calls\": [{\"id\": \"abc123XYZ\", \"type\": \"function\", \"function\":"
    "   {\"name\": \"get\", \"arguments\": {\"q\": \"x\", \"n\": 2, \"f\": 0.5}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"abc123XYZ\", \"content\": \"{\\\"ok\\\": true}\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\", \"parameters\":"
    "   {\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}}}}}],"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true,"
    " \"enable_thinking\": false}";

static cJSON *vars;
static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vars)
        vars = cJSON_Parse(vars_json);
    const uint8_t *nul       = memchr(data, 0, size);
    size_t tmpl_len          = nul ? (size_t)(nul - data) : size;
    struct jinja_template *t = NULL;
    char err[HEARTH_ERR_MAX];
    if (jinja_compile((const char *)data, tmpl_len, &t, err, sizeof err) != HEARTH_OK)
        return 0;
    cJSON *raw = NULL;
    if (nul) { /* the rest as x: a raw item, so jinja_json.c parses it */
        char *text = malloc(size - tmpl_len);
        memcpy(text, nul + 1, size - tmpl_len - 1);
        text[size - tmpl_len - 1] = 0;
        raw                       = cJSON_CreateRaw(text);
        free(text);
        cJSON_AddItemToObject(vars, "x", raw);
    }
    struct jinja_opts o;
    jinja_opts_default(&o);
    o.max_steps  = 20000;
    o.max_depth  = 16;
    o.max_output = 64 * 1024;
    o.max_memory = 8u << 20;
    o.now        = 0;
    char *out    = NULL;
    size_t len   = 0;
    if (jinja_render(t, vars, &o, &out, &len, err, sizeof err) == HEARTH_OK)
        sink += len;
    free(out);
    jinja_free(t);
    if (raw)
        cJSON_DeleteItemFromObject(vars, "x");
    return 0;
}
