/*
 * fuzz_lark.c: libFuzzer target for the Lark converter (lark.c), which
 * reads custom tools' grammars from Responses requests. The input is the
 * grammar text; both outputs are made, the GBNF is parsed by the grammar
 * engine and the regex by the JSON schema path. The GBNF must be taken (the
 * converter checks it); the regex may be refused (the caller then leaves a
 * tool's input free). Any refusal of the input is fine; a crash, a leak,
 * undefined behaviour or GBNF the engine refuses is the bug. Seeds: tests/fuzz/corpus/lark.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/lark.h"
#include "grammar/schema.h"

static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    const char *def = (const char *)data;
    char *gbnf      = lark_to_gbnf(def, size, err, sizeof err);
    if (gbnf) {
        if (grammar_check(gbnf, strlen(gbnf), NULL, err, sizeof err) != HEARTH_OK) {
            fprintf(stderr, "GBNF refused: %s\n%s\n", err, gbnf);
            abort();
        }
        free(gbnf);
    }
    char *rx = lark_to_regex(def, size, err, sizeof err);
    if (rx) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", "string");
        cJSON_AddStringToObject(s, "pattern", rx);
        struct schema_gbnf *b = schema_gbnf_new();
        /* the schema path may refuse a regex (a /regex/ body is the client's; the caller then
         * leaves the input free): only that it runs is checked */
        sink += schema_gbnf_add(b, "root", s, err, sizeof err);
        schema_gbnf_free(b);
        cJSON_Delete(s);
        free(rx);
    }
    return 0;
}
