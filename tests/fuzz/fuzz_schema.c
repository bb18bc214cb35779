/*
 * fuzz_schema.c: libFuzzer target for the JSON schema converter, which
 * reads schemas straight from requests (response_format, tool parameters).
 * Bytes -> cJSON -> schema_gbnf_add; an accepted schema's grammar must
 * parse (grammar_check), and a refused one must leave an error sentence
 * and the builder as it was. Seeds: tests/fuzz/corpus/schema.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "grammar/grammar.h"
#include "grammar/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size]    = '\0';
    cJSON *schema = cJSON_Parse(text);
    free(text);
    if (!schema)
        return 0;
    struct schema_gbnf *b    = schema_gbnf_new();
    char err[HEARTH_ERR_MAX] = "";
    if (!b || !schema_gbnf_rule(b, "wrap", "\"<\" root \">\""))
        abort();
    char *before = schema_gbnf_text(b);
    if (schema_gbnf_add(b, "root", schema, err, sizeof err)) {
        char *gbnf = schema_gbnf_text(b);
        if (!gbnf || grammar_check(gbnf, strlen(gbnf), "wrap", err, sizeof err) != HEARTH_OK)
            abort(); /* every grammar the converter writes must parse */
        free(gbnf);
    } else {
        char *after = schema_gbnf_text(b);
        if (!err[0] || !after || strcmp(before, after))
            abort();
        free(after);
    }
    free(before);
    schema_gbnf_free(b);
    cJSON_Delete(schema);
    return 0;
}
