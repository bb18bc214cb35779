/*
 * fuzz_schema.c: libFuzzer target for the JSON schema converter, which
 * reads schemas straight from requests (response_format, tool parameters).
 * Bytes -> cJSON -> schema_gbnf_add; an accepted schema's grammar must
 * parse (grammar_check) and compile against a vocabulary of the 256 bytes
 * within the compile's budget (a 400 naming the cost is fine: a slow input
 * is the bug, found by -timeout), and a refused one must leave an error
 * sentence and the builder as it was. Seeds: tests/fuzz/corpus/schema.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "grammar/grammar.h"
#include "grammar/schema.h"

static struct grammar_vocab *vocab;

static struct grammar_vocab *make_vocab(void)
{
    static char bytes[256];
    const char *toks[257];
    uint32_t lens[257];
    uint8_t kinds[257];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        toks[i]  = &bytes[i];
        lens[i]  = 1;
        kinds[i] = GRAMMAR_TOKEN_TEXT;
    }
    toks[256]  = "</s>";
    lens[256]  = 4;
    kinds[256] = GRAMMAR_TOKEN_EOG;
    return grammar_vocab_new(257, toks, lens, kinds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vocab)
        vocab = make_vocab();
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
        struct grammar *g = NULL;
        enum hearth_status st =
            grammar_compile(gbnf, strlen(gbnf), "wrap", vocab, NULL, &g, err, sizeof err);
        if (st != HEARTH_OK && st != HEARTH_EINVAL)
            abort(); /* nothing a schema does is the server's fault */
        grammar_unref(g);
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
