/* chatutil.c: chatutil.h's helpers. */
#include "util/chatutil.h"

#include <stdint.h>
#include <stdlib.h>

#include "grammar/grammar.h"
#include "chat/chat_template.h"
#include "util/testutil.h"

struct grammar_vocab *tu_byte_vocab(void)
{
    static char bytes[256];
    const char *ptr[257];
    uint32_t lens[257];
    uint8_t kinds[257];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        ptr[i]   = &bytes[i];
        lens[i]  = 1;
        kinds[i] = GRAMMAR_TOKEN_TEXT;
    }
    ptr[256]   = "";
    lens[256]  = 0;
    kinds[256] = GRAMMAR_TOKEN_EOG;
    return grammar_vocab_new(257, ptr, lens, kinds);
}

struct chat_template *tu_load_template(const char *rel)
{
    const char *path = tu_shared(rel);
    if (!path) {
        print_message("skip: %s not found (set HEARTH_SHARED or put shared/ beside the "
                      "checkout)\n",
                      rel);
        return NULL;
    }
    size_t n;
    char *src = tu_read_file(path, &n);
    assert_non_null(src);
    struct chat_template *t = NULL;
    char err[HEARTH_ERR_MAX];
    if (chat_template_new(NULL, src, rel, NULL, &t, err, sizeof err) != HEARTH_OK)
        print_message("%s\n", err);
    free(src);
    assert_non_null(t);
    return t;
}
