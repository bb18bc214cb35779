/* test_grammar_cache.c: src/grammar/cache.c, compiled grammars kept for reuse. */
#include <string.h>

#include "grammar/grammar.h"
#include "util/testutil.h"

static struct grammar_vocab *vocab(void)
{
    static const char *const t[] = {"a", "b", "ab", ""};
    const uint32_t lens[]        = {1, 1, 2, 0};
    const uint8_t kinds[]        = {GRAMMAR_TOKEN_TEXT, GRAMMAR_TOKEN_TEXT, GRAMMAR_TOKEN_TEXT,
                                    GRAMMAR_TOKEN_EOG};
    return grammar_vocab_new(4, t, lens, kinds);
}

static struct grammar *get(struct grammar_cache *c, const char *text, const char *root)
{
    struct grammar *g = NULL;
    char err[256];
    enum hearth_status st =
        grammar_cache_compile(c, text, strlen(text), root, NULL, &g, err, sizeof err);
    if (st != HEARTH_OK)
        print_message("%s\n", err);
    assert_int_equal(st, HEARTH_OK);
    return g;
}

static void test_same_text_same_grammar_lru_out(void **state)
{
    (void)state;
    struct grammar_vocab *v = vocab();
    struct grammar_cache *c = grammar_cache_new(v, 2);
    assert_ptr_equal(grammar_cache_vocab(c), v);
    struct grammar *a1 = get(c, "root ::= \"a\"+", NULL), *a2 = get(c, "root ::= \"a\"+", "root");
    assert_ptr_equal(a1, a2); /* reused, not recompiled */
    struct grammar *b = get(c, "root ::= \"b\"+", NULL);
    assert_ptr_not_equal(a1, b);
    /* the root is part of the key */
    struct grammar *x = get(c, "x ::= \"a\"\nroot ::= \"b\"", "x");
    struct grammar *y = get(c, "x ::= \"a\"\nroot ::= \"b\"", NULL);
    assert_ptr_not_equal(x, y);
    assert_true(grammar_accepts_string(x, "a", 1));
    assert_true(grammar_accepts_string(y, "b", 1));
    /* capacity 2: the "a"+ grammar, least recently used, was dropped and comes back anew; the
     * caller's references stay valid */
    struct grammar *a3 = get(c, "root ::= \"a\"+", NULL);
    assert_ptr_not_equal(a3, a1);
    assert_true(grammar_accepts_string(a1, "aa", 2));
    /* a failed compile is an error each time and takes no room */
    struct grammar *bad = NULL;
    char err[256];
    assert_int_equal(grammar_cache_compile(c, "root ::= (", 10, NULL, NULL, &bad, err, sizeof err),
                     HEARTH_EINVAL);
    assert_null(bad);
    assert_ptr_equal(get(c, "root ::= \"a\"+", NULL), a3);
    grammar_unref(a3);
    grammar_unref(a3);
    for (struct grammar **g = (struct grammar *[]){a1, a2, b, x, y, NULL}; *g; g++)
        grammar_unref(*g);
    grammar_cache_free(c);
    grammar_vocab_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_text_same_grammar_lru_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
