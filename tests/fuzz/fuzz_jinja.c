/*
 * fuzz_jinja.c: libFuzzer target for the Jinja interpreter, which compiles
 * chat templates that come inside GGUF files and requests. The input is the
 * template; it is compiled and, if that succeeds, rendered with a small
 * fixed conversation under tight bounds (so a slow input is an error, not a
 * timeout). Any status is fine; a crash, a leak or undefined behaviour is
 * the bug. Seeds: tests/fuzz/corpus/jinja.
 */
#include <stdint.h>
#include <stdlib.h>

#include "template/jinja.h"

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
    struct jinja_template *t = NULL;
    char err[HEARTH_ERR_MAX];
    if (jinja_compile((const char *)data, size, &t, err, sizeof err) != HEARTH_OK)
        return 0;
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
    return 0;
}
