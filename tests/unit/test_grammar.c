/*
 * test_grammar.c: src/grammar/: the GBNF parser's errors (with line and
 * column), left recursion and bound refusals, grammar_accepts_string, and
 * the fast token mask held token for token to the naive one (every token's
 * bytes run through the matcher) along random walks, over a small custom
 * vocabulary and real ones (512-token SPMs, a 32k BPE, a 102k BPE).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "grammar/grammar_int.h"
#include "text/tokenizer.h"
#include "util/rng.h"
#include "util/testutil.h"

/* ------------------------------------------------------------- helpers --- */

static struct grammar *compile_ok(const char *text, const struct grammar_vocab *v)
{
    struct grammar *g        = NULL;
    char err[HEARTH_ERR_MAX] = "";
    enum hearth_status st = grammar_compile(text, strlen(text), NULL, v, NULL, &g, err, sizeof err);
    if (st != HEARTH_OK)
        fail_msg("grammar_compile: %s\n--- grammar:\n%s", err, text);
    return g;
}

/* Compiles text, which must fail with an error containing want. */
static void compile_err(const char *text, const char *want)
{
    struct grammar *g        = NULL;
    char err[HEARTH_ERR_MAX] = "";
    enum hearth_status st =
        grammar_compile(text, strlen(text), NULL, NULL, NULL, &g, err, sizeof err);
    if (st == HEARTH_OK)
        fail_msg("grammar compiled but should fail with \"%s\":\n%s", want, text);
    assert_null(g);
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not contain \"%s\" (grammar: %s)", err, want, text);
    assert_int_equal(grammar_check(text, strlen(text), NULL, err, sizeof err), HEARTH_EINVAL);
}

static bool accepts(const struct grammar *g, const char *s)
{
    return grammar_accepts_string(g, s, strlen(s));
}

/* ---------------------------------------------------------- parse errors --- */

static void test_parse_errors(void **state)
{
    (void)state;
    compile_err("root ::= \"a\"\nfoo ::= bar\n", "line 2, column 9: rule 'bar' is not defined");
    compile_err("root ::= \"abc\n", "line 1, column 10: unterminated string");
    compile_err("root ::= [a-z\n", "line 1, column 10: unterminated character class");
    compile_err("root ::= \"a\" )\n", "line 1, column 14: unmatched ')'");
    compile_err("root ::= (\"a\"\n", "unclosed '('");
    compile_err("\n\nroot = \"a\"\n", "line 3, column 6: expecting '::='");
    compile_err("root ::= \"\\q\"\n", "line 1, column 11: unknown escape");
    compile_err("root ::= \"\\x4\"\n", "expecting 2 hex digits");
    compile_err("root ::= \"a\"{,3}\n", "line 1, column 14: expecting a repetition count");
    compile_err("root ::= \"a\"{2001}\n", "repetition minimum 2001 is above 2000");
    compile_err("root ::= *\n", "line 1, column 10: '*' has nothing before it");
    compile_err("root ::= \"a\"{3,2}\n", "line 1, column 13: repetition {3,2}");
    compile_err("root ::= \"a\"{1000000}\n", "repetition count 1000000 is above");
    compile_err("root ::= \"a\"{,}\n", "expecting a repetition count");
    compile_err("root ::= \"\\uD800\"\n", "surrogate");
    compile_err("root ::= \"\\U00110000\"\n", "above U+10FFFF");
    compile_err("root ::= \"a\"\nroot ::= \"b\"\n",
                "line 2, column 1: rule 'root' is defined twice");
    compile_err("foo ::= \"a\"\n", "no rule 'root'");
    compile_err("", "no rule 'root'");
    compile_err("root ::= \"a\" \"b\" @\n", "line 1, column 18: unexpected '@'");
    /* a newline ends a rule outside parentheses */
    compile_err("root ::= \"a\"\n  | \"b\"\n", "line 2, column 3: expecting a rule name");
    /* deep nesting is refused, not a stack overflow */
    char deep[2000];
    size_t at = (size_t)sprintf(deep, "root ::= ");
    for (int i = 0; i < 300; i++)
        deep[at++] = '(';
    deep[at++] = '"';
    deep[at++] = 'a';
    deep[at++] = '"';
    for (int i = 0; i < 300; i++)
        deep[at++] = ')';
    deep[at] = 0;
    compile_err(deep, "nested deeper than");
}

static void test_left_recursion(void **state)
{
    (void)state;
    compile_err("root ::= root \"a\" | \"b\"\n", "rule 'root' is left-recursive");
    compile_err("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"\n", "is left-recursive");
    /* through a rule that matches the empty string */
    compile_err("root ::= e root \"x\" | \"y\"\ne ::= \"z\"?\n", "rule 'root' is left-recursive");
    compile_err("root ::= (\"a\"?)*\n", "left-recursive");
    /* right recursion is fine */
    struct grammar *g = compile_ok("root ::= \"a\" root | \"b\"\n", NULL);
    assert_true(accepts(g, "aaab"));
    assert_false(accepts(g, "aaa"));
    grammar_unref(g);
}

static void test_bounds(void **state)
{
    (void)state;
    struct grammar *g =
        compile_ok("root ::= \"a\"{2,4} [0-9]{3} \"x\"{0,2} \"-\"{0,1} \"e\"{2,}\n", NULL);
    assert_true(accepts(g, "aa123ee"));
    assert_true(accepts(g, "aaaa123xx-eeeee"));
    assert_false(accepts(g, "a123ee"));
    assert_false(accepts(g, "aaaaa123ee"));
    assert_false(accepts(g, "aa12ee"));
    assert_false(accepts(g, "aa123xxxee"));
    assert_false(accepts(g, "aa123--ee"));
    assert_false(accepts(g, "aa123e"));
    grammar_unref(g);
    g = compile_ok("root ::= (\"ab\" | \"c\"){3}\n", NULL);
    assert_true(accepts(g, "abcab"));
    assert_false(accepts(g, "abc"));
    grammar_unref(g);
    /* a large but allowed repetition compiles and matches */
    g = compile_ok("root ::= \"x\"{2000} \"x\"{0,2096}\n", NULL);
    char s[4098];
    memset(s, 'x', 4097);
    assert_true(grammar_accepts_string(g, s, 4096));
    assert_true(grammar_accepts_string(g, s, 2000));
    assert_false(grammar_accepts_string(g, s, 1999));
    assert_false(grammar_accepts_string(g, s, 4097));
    grammar_unref(g);
    /* exponential alternatives collapse; a stack-count bound is an error, not a hang */
    g = compile_ok("root ::= ((\"x\"|\"x\")|(\"x\"|\"x\"))*\n", NULL);
    assert_true(accepts(g, "xxxx"));
    grammar_unref(g);
}

static void test_accepts_string(void **state)
{
    (void)state;
    struct grammar *g = compile_ok("# arithmetic\n"
                                   "root   ::= expr\n"
                                   "expr   ::= term ((\"+\" | \"-\") term)*   # sums\n"
                                   "term   ::= factor ((\"*\" | \"/\") factor)*\n"
                                   "factor ::= number | \"(\" expr \")\"\n"
                                   "number ::= [0-9]+ (\".\" [0-9]+)?\n",
                                   NULL);
    assert_true(accepts(g, "1+2*3"));
    assert_true(accepts(g, "(1.5+2)*(3-4)/5"));
    assert_false(accepts(g, "1+"));
    assert_false(accepts(g, "(1+2"));
    assert_false(accepts(g, "1..2"));
    assert_false(accepts(g, ""));
    grammar_unref(g);

    g = compile_ok("root ::= \"\\\"\" [^\"\\\\]* \"\\\"\" \"\\n\\t\\x41\\u00e9\\U0001F600\" .\n",
                   NULL);
    assert_true(accepts(g, "\"h\xc3\xa9llo\"\n\tA\xc3\xa9\xf0\x9f\x98\x80z"));
    assert_true(accepts(g, "\"\"\n\tA\xc3\xa9\xf0\x9f\x98\x80\xe4\xb8\x80"));
    assert_false(accepts(g, "\"a\"b\"\n\tA\xc3\xa9\xf0\x9f\x98\x80z"));
    assert_false(accepts(g, "\"\"\n\tA\xc3\xa9\xf0\x9f\x98\x80"));             /* . needs one */
    assert_false(accepts(g, "\"\"\n\tA\xc3\xa9\xf0\x9f\x98\x80\xed\xa0\x80")); /* a surrogate */
    assert_false(accepts(g, "\"\"\n\tA\xc3\xa9\xf0\x9f\x98\x80\xc3"));         /* cut short */
    grammar_unref(g);

    /* classes with escapes and ranges across encoded lengths, negation, rules over lines */
    g = compile_ok("root ::= [a\\]\\x7f-\\u0800]+ (\n  [^a-z\\n]\n  | \"\\[\"\n) \"!\"\n", NULL);
    assert_true(accepts(g, "a]\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80"
                           "A!"));
    assert_true(accepts(g, "a[!"));
    assert_false(accepts(g, "b!"));
    assert_false(accepts(g, "aa!"));
    assert_false(accepts(g, "a\xe0\xa0\x81"
                            "A!"));
    assert_true(accepts(g, "a\xe4\xb8\x80!")); /* CJK is outside [a-z\n] */
    grammar_unref(g);

    g = compile_ok("root ::= \"x\" | \n", NULL); /* an empty alternative */
    assert_true(accepts(g, ""));
    assert_true(accepts(g, "x"));
    grammar_unref(g);

    struct grammar *g2 = NULL;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(
        grammar_compile("start ::= \"s\"\n", 14, "start", NULL, NULL, &g2, err, sizeof err),
        HEARTH_OK);
    assert_true(accepts(g2, "s"));
    grammar_unref(g2);
}

/* --------------------------------------------------------- mask checks --- */

static void print_tok(const struct grammar_vocab *v, int32_t t)
{
    char buf[128];
    size_t n = 0;
    for (uint32_t i = 0; i < v->lens[t] && n < sizeof buf - 8; i++) {
        uint8_t c = gv_bytes(v, t)[i];
        n += (size_t)(c >= 0x20 && c < 0x7f && c != '\\'
                          ? snprintf(buf + n, sizeof buf - n, "%c", c)
                          : snprintf(buf + n, sizeof buf - n, "\\x%02x", c));
    }
    buf[n] = 0;
    print_message("#   token %d kind %d \"%s\"\n", t, v->kinds[t], buf);
}

/* Fast mask == naive mask, and allows() agrees with both on a sample; returns the count. */
static int32_t check_mask(struct grammar_matcher *m, const struct grammar_vocab *v, uint32_t *fast,
                          uint32_t *naive, uint64_t *rng, int step)
{
    char err[HEARTH_ERR_MAX] = "";
    int32_t nf               = grammar_matcher_mask(m, fast, err, sizeof err);
    if (nf < 0)
        fail_msg("mask: %s", err);
    int32_t nn = grammar_matcher_mask_naive(m, naive, err, sizeof err);
    if (nn < 0)
        fail_msg("naive mask: %s", err);
    size_t words = ((size_t)v->n + 31) / 32;
    if (nf != nn || memcmp(fast, naive, words * sizeof *fast) != 0) {
        int shown = 0;
        for (int32_t t = 0; t < v->n && shown < 10; t++) {
            bool a = fast[t >> 5] >> (t & 31) & 1, b = naive[t >> 5] >> (t & 31) & 1;
            if (a != b) {
                print_message("# step %d: fast %d naive %d for\n", step, a, b);
                print_tok(v, t);
                shown++;
            }
        }
        fail_msg("step %d: fast mask has %d tokens, naive %d", step, nf, nn);
    }
    for (int i = 0; i < 300; i++) {
        int32_t t = (int32_t)(splitmix64(rng) % (uint64_t)v->n);
        if (grammar_matcher_allows(m, t) != (bool)(naive[t >> 5] >> (t & 31) & 1)) {
            print_tok(v, t);
            fail_msg("step %d: allows(%d) disagrees with the mask", step, t);
        }
    }
    return nf;
}

/* Picks a random token of the mask; prefers text while steps remain. */
static int32_t pick(const struct grammar_vocab *v, const uint32_t *mask, int32_t n_allowed,
                    bool prefer_end, uint64_t *rng)
{
    int32_t want = (int32_t)(splitmix64(rng) % (uint64_t)n_allowed);
    int32_t any = -1, eog = -1;
    for (int32_t t = 0, k = 0; t < v->n; t++) {
        if (!(mask[t >> 5] >> (t & 31) & 1))
            continue;
        if (v->kinds[t] == GRAMMAR_TOKEN_EOG) {
            eog = t;
        } else if (k++ <= want || any < 0) {
            any = t;
        }
    }
    if (eog >= 0 && (prefer_end || any < 0))
        return eog;
    return any;
}

/* Random walks over g: the masks agree at every step; each walk ends at EOG or after max steps. */
static void walk(const char *text, const struct grammar_vocab *v, int walks, int max_steps,
                 const char *const *triggers, int n_triggers, const char *prefix_text,
                 const int32_t *prefix, int n_prefix)
{
    struct grammar *g = compile_ok(text, v);
    size_t words      = ((size_t)v->n + 31) / 32;
    uint32_t *fast = malloc(words * 4), *naive = malloc(words * 4);
    uint64_t rng = 12345;
    int ended    = 0;
    (void)prefix_text;
    for (int w = 0; w < walks; w++) {
        struct grammar_matcher *m = grammar_matcher_new(g, triggers, n_triggers);
        assert_non_null(m);
        char err[HEARTH_ERR_MAX] = "";
        for (int i = 0; i < n_prefix; i++) {
            check_mask(m, v, fast, naive, &rng, -1 - i);
            if (!grammar_matcher_accept(m, prefix[i], err, sizeof err))
                fail_msg("prefix token %d: %s", prefix[i], err);
        }
        if (n_triggers > 0 && n_prefix > 0)
            assert_true(grammar_matcher_active(m));
        for (int step = 0; step < max_steps; step++) {
            int32_t n = check_mask(m, v, fast, naive, &rng, step);
            assert_true(n > 0);
            int32_t t = pick(v, fast, n, step >= max_steps / 2, &rng);
            if (v->kinds[t] == GRAMMAR_TOKEN_EOG) {
                assert_true(grammar_matcher_can_end(m));
                ended++;
                break;
            }
            if (!grammar_matcher_accept(m, t, err, sizeof err))
                fail_msg("step %d: accept %d: %s", step, t, err);
        }
        grammar_matcher_free(m);
    }
    print_message("# %d walks, %d ended at EOG, %zu bytes of tables\n", walks, ended,
                  grammar_mem_bytes(g));
    free(fast);
    free(naive);
    grammar_unref(g);
}

static const char json_gbnf[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
    "[0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

/* clang-format off */
static const char *const grammars[] = {
    json_gbnf,
    "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor ((\"*\" | \"/\") factor)*\n"
    "factor ::= number | \"(\" expr \")\"\nnumber ::= [0-9]+ (\".\" [0-9]+)?\n",
    "root ::= item\nitem ::= \"[\" (item (\", \" item)*)? \"]\" | [a-z]+ | \"'\" [^']* \"'\"\n",
    "root ::= ([a-z\\u00e0-\\u00ff\\u4e00-\\u9fff] | [ ,.])+ \"\\n\" .{0,3}\n",
    "root ::= \"a\"{2,4} [0-9 ]{3} (\"the\" | \" the\" | \"them\"){0,3} \"end\"\n",
    "root ::= \"Once\" [^.]{1,40} \".\" (\" \" [A-Z] [a-z ]* \".\"){0,2}\n",
};
/* clang-format on */

/* --------------------------------------------------------- small vocab --- */

static struct grammar_vocab *small_vocab(void)
{
    /* a 3-byte character (U+4E2D, e4 b8 ad) split across tokens in every way */
    static const char *const toks[] = {
        "\xe4", "\xb8", "\xad", "\xe4\xb8", "\xb8\xad", "\xe4\xb8\xad", "\xe4\xb8\xad\xe4", "a",
        "ab",   "b\"",  "\"",   "\"a",      "<eos>",    "<ctl>",        "\xad\xe4\xb8",     ""};
    static const uint8_t kinds[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0};
    uint32_t lens[16];
    for (int i = 0; i < 16; i++)
        lens[i] = (uint32_t)strlen(toks[i]);
    return grammar_vocab_new(16, toks, lens, kinds);
}

/* ---------------------------------------------------------------- budget --- */

/* Compiles text against v, which must fail with want_st and an error containing want. */
static void compile_refused(const char *text, const struct grammar_vocab *v,
                            const atomic_int *cancel, enum hearth_status want_st, const char *want)
{
    struct grammar *g        = NULL;
    char err[HEARTH_ERR_MAX] = "";
    enum hearth_status st =
        grammar_compile(text, strlen(text), NULL, v, cancel, &g, err, sizeof err);
    assert_null(g);
    if (st != want_st || !strstr(err, want))
        fail_msg("status '%s', error \"%s\"; want '%s' with \"%s\" (grammar: %.200s)",
                 hearth_status_str(st), err, hearth_status_str(want_st), want, text);
}

/*
 * The shapes whose compile once held the preparation thread for minutes,
 * each refused with its cost named (how fast is the report's measure, not a
 * test's), and a costly but bounded one that still compiles.
 */
static void test_costly_grammars(void **state)
{
    (void)state;
    struct grammar_vocab *v = small_vocab();
    assert_non_null(v);
    /* nested bounded repetitions multiply: a million (position, caller) contexts */
    compile_refused("root ::= (([a-z]){0,1000}){0,1000}\n", v, NULL, HEARTH_EINVAL,
                    "the grammar would need more than 32768 parser states");
    /* 100,000 alternatives: no matcher could start (the scheduler's 500, once) */
    size_t cap = 16u << 20, n = 0;
    char *alt = malloc(cap);
    assert_non_null(alt);
    n += (size_t)snprintf(alt + n, cap - n, "root ::= \"w0\"");
    for (int i = 1; i < 100000; i++)
        n += (size_t)snprintf(alt + n, cap - n, " | \"w%d\"", i);
    snprintf(alt + n, cap - n, "\n");
    compile_refused(alt, v, NULL, HEARTH_EINVAL, "more than 4096 parse stacks at once");
    compile_refused(alt, NULL, NULL, HEARTH_EINVAL, "more than 4096 parse stacks at once");
    free(alt);
    /* contexts within the bound, closures past the steps allowed */
    compile_refused("root ::= (([a-z]){0,180}){0,180}\n", v, NULL, HEARTH_EINVAL,
                    "too costly to compile: it would need more than 16777216 analysis steps");
    /* 32,001 contexts along a chain of 2,000 optional groups: costly, within every bound */
    struct grammar *g = compile_ok(
        "root ::= (\"a\" | \"ab\" | \"abc\" | \"abcd\" | \"b\" | \"bc\" | \"bcd\"){0,2000} "
        "\"x\"\n",
        v);
    assert_int_equal(g->n_ctxs, 32001);
    assert_true(accepts(g, "abcdbcx"));
    assert_false(accepts(g, "abcdbc"));
    grammar_unref(g);
    grammar_vocab_free(v);
}

static void test_cancel(void **state)
{
    (void)state;
    struct grammar_vocab *v = small_vocab();
    assert_non_null(v);
    atomic_int cancel = 1;
    compile_refused(json_gbnf, v, &cancel, HEARTH_ECANCELED, "cancelled");
    compile_refused("root ::= (([a-z]){0,180}){0,180}\n", v, &cancel, HEARTH_ECANCELED,
                    "cancelled");
    atomic_store(&cancel, 0);
    struct grammar *g        = NULL;
    char err[HEARTH_ERR_MAX] = "";
    assert_int_equal(
        grammar_compile(json_gbnf, strlen(json_gbnf), NULL, v, &cancel, &g, err, sizeof err),
        HEARTH_OK);
    grammar_unref(g);
    /* set while compiling: the next poll of the budget sees it, and every spend after fails */
    struct gbudget b;
    gbudget_init(&b, &cancel);
    assert_true(gbudget_spend(&b, GBUDGET_POLL - 1));
    atomic_store(&cancel, 1);
    assert_false(gbudget_spend(&b, 1));
    assert_int_equal(b.st, HEARTH_ECANCELED);
    assert_false(gbudget_walk(&b, 1));
    assert_int_equal(b.st, HEARTH_ECANCELED);
    /* a budget spent names its limit */
    gbudget_init(&b, NULL);
    assert_false(gbudget_spend(&b, GRAMMAR_MAX_WORK + 1));
    assert_int_equal(b.st, HEARTH_EINVAL);
    assert_non_null(strstr(b.msg, "more than 16777216 analysis steps"));
    gbudget_init(&b, NULL);
    assert_false(gbudget_walk(&b, GRAMMAR_MAX_WALK + 1));
    assert_int_equal(b.st, HEARTH_EINVAL);
    assert_non_null(strstr(b.msg, "more than 4294967296 steps over the vocabulary"));
    grammar_vocab_free(v);
}

static void test_utf8_split_tokens(void **state)
{
    (void)state;
    struct grammar_vocab *v = small_vocab();
    assert_non_null(v);
    assert_int_equal(grammar_vocab_size(v), 16);
    struct grammar *g         = compile_ok("root ::= \"\\\"\" [\\u4e00-\\u9fff]+ \"\\\"\"\n", v);
    struct grammar_matcher *m = grammar_matcher_new(g, NULL, 0);
    uint32_t mask[1];
    char err[HEARTH_ERR_MAX];
    assert_int_equal(grammar_matcher_mask(m, mask, err, sizeof err), 1);
    assert_int_equal(mask[0], 1u << 10); /* only "\"" */
    assert_true(grammar_matcher_accept(m, 10, err, sizeof err));
    /* a start byte alone, two bytes, the whole character, and one plus the next's start */
    assert_true(grammar_matcher_allows(m, 0));
    assert_true(grammar_matcher_allows(m, 3));
    assert_true(grammar_matcher_allows(m, 5));
    assert_true(grammar_matcher_allows(m, 6));
    assert_false(grammar_matcher_allows(m, 1));
    assert_false(grammar_matcher_allows(m, 12)); /* EOG: not complete */
    assert_false(grammar_matcher_allows(m, 13)); /* control: never */
    assert_false(grammar_matcher_allows(m, 15)); /* empty: never */
    assert_true(grammar_matcher_accept(m, 0, err, sizeof err));
    assert_true(grammar_matcher_allows(m, 1));
    assert_true(grammar_matcher_allows(m, 4));
    assert_false(grammar_matcher_allows(m, 2));
    assert_false(grammar_matcher_accept(m, 2, err, sizeof err));
    assert_non_null(strstr(err, "not allowed"));
    assert_true(grammar_matcher_accept(m, 1, err, sizeof err));
    /* any continuation byte completes a character of the class; b8 ad does, then ad cannot start
     * one */
    assert_int_equal(grammar_matcher_mask(m, mask, err, sizeof err), 3);
    assert_int_equal(mask[0], (1u << 1) | (1u << 2) | (1u << 14));
    assert_true(grammar_matcher_accept(m, 14, err, sizeof err)); /* ad e4 b8 */
    assert_true(grammar_matcher_accept(m, 2, err, sizeof err));
    assert_false(grammar_matcher_can_end(m));
    assert_true(grammar_matcher_accept(m, 10, err, sizeof err));
    assert_true(grammar_matcher_can_end(m));
    assert_true(grammar_matcher_must_end(m));
    assert_int_equal(grammar_matcher_mask(m, mask, err, sizeof err), 1);
    assert_int_equal(mask[0], 1u << 12);
    grammar_matcher_free(m);
    grammar_unref(g);

    /* every step of random walks, fast == naive, on a few grammars */
    walk("root ::= \"\\\"\" [\\u4e00-\\u9fff]* \"\\\"\" \"a\"?\n", v, 20, 12, NULL, 0, NULL, NULL,
         0);
    walk("root ::= ([^\"] | \"\\\"a\")* \"\\\"\"\n", v, 20, 12, NULL, 0, NULL, NULL, 0);
    walk("root ::= x+\nx ::= \"a\" | \"ab\" | \"b\\\"\" | [\\u4e2d]\n", v, 20, 12, NULL, 0, NULL,
         NULL, 0);
    grammar_vocab_free(v);
}

static void test_lazy_small(void **state)
{
    (void)state;
    struct grammar_vocab *v   = small_vocab();
    struct grammar *g         = compile_ok("root ::= \"\\\"a\" [ab]+ \"\\\"\"\n", v);
    const char *trig[]        = {"\"a"};
    struct grammar_matcher *m = grammar_matcher_new(g, trig, 1);
    char err[HEARTH_ERR_MAX];
    uint32_t mask[1];
    assert_false(grammar_matcher_active(m));
    assert_int_equal(grammar_matcher_mask(m, mask, err, sizeof err), 16);
    assert_true(grammar_matcher_can_end(m));
    assert_true(grammar_matcher_accept(m, 7, err, sizeof err));  /* "a" */
    assert_true(grammar_matcher_accept(m, 10, err, sizeof err)); /* "\"": half the trigger */
    assert_false(grammar_matcher_active(m));
    assert_true(grammar_matcher_accept(m, 8, err, sizeof err)); /* "ab": trigger done, then b */
    assert_true(grammar_matcher_active(m));
    assert_false(grammar_matcher_can_end(m));
    assert_true(grammar_matcher_allows(m, 9));   /* b" */
    assert_false(grammar_matcher_allows(m, 12)); /* not yet */
    assert_true(grammar_matcher_accept(m, 9, err, sizeof err));
    assert_true(grammar_matcher_must_end(m));
    grammar_matcher_free(m);
    grammar_unref(g);
    grammar_vocab_free(v);
}

/* ---------------------------------------------------------- real vocabs --- */

static void real_vocab(const char *path, int walks, int steps, bool all_grammars)
{
    struct hearth_model *model = NULL;
    char err[HEARTH_ERR_MAX];
    if (hearth_model_load(path, NULL, &model, err, sizeof err) != HEARTH_OK)
        fail_msg("%s: %s", path, err);
    struct grammar_vocab *v = grammar_vocab_from_model(model);
    assert_non_null(v);
    int n = all_grammars ? (int)(sizeof grammars / sizeof *grammars) : 2;
    for (int i = 0; i < n; i++)
        walk(grammars[i], v, walks, steps, NULL, 0, NULL, NULL, 0);
    /* lazy: the prompt-side text, tokenized by the model, reaches the trigger */
    const char *text  = "Sure. <tool>{\"a\": 1";
    hearth_token *ids = NULL;
    size_t n_ids      = 0;
    assert_int_equal(
        hearth_tokenize(model, text, strlen(text), false, false, &ids, &n_ids, err, sizeof err),
        HEARTH_OK);
    const char *trig[] = {"<tool>"};
    char lazy[2048];
    snprintf(lazy, sizeof lazy, "root ::= \"<tool>\" object \"</tool>\"\n%s",
             strstr(json_gbnf, "value "));
    walk(lazy, v, walks, steps, trig, 1, text, ids, (int)n_ids);
    free(ids);
    grammar_vocab_free(v);
    hearth_model_free(model);
}

static void test_mask_stories260k(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    real_vocab(path, 6, 40, true);
}

static void test_mask_spm512(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q8_0.gguf");
    real_vocab(path, 3, 25, true);
}

static void test_mask_bpe32k(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "tiny-qwen2-bpe-q8_0.gguf");
    real_vocab(path, 2, 12, false);
}

/* The largest vocabulary in shared/vocab (102k BPE, a vocab-only file: no model to load). */
static void test_mask_bpe102k(void **state)
{
    (void)state;
    TU_SHARED_OR_SKIP(path, "vocab/ggml-vocab-deepseek-llm.gguf");
    struct gguf_file *f      = NULL;
    struct tokenizer *t      = NULL;
    char err[HEARTH_ERR_MAX] = "";
    if (gguf_open(path, &f, err, sizeof err) != HEARTH_OK || tokenizer_load(f, &t, err, sizeof err))
        fail_msg("%s: %s", path, err);
    gguf_close(f);
    struct grammar_vocab *v = grammar_vocab_from_tokenizer(t);
    assert_non_null(v);
    assert_int_equal(grammar_vocab_size(v), 102400);
    walk(json_gbnf, v, 2, 10, NULL, 0, NULL, NULL, 0);
    walk(grammars[3], v, 1, 10, NULL, 0, NULL, NULL, 0);
    grammar_vocab_free(v);
    tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_left_recursion),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_accepts_string),
        cmocka_unit_test(test_utf8_split_tokens),
        cmocka_unit_test(test_costly_grammars),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_lazy_small),
        cmocka_unit_test(test_mask_stories260k),
        cmocka_unit_test(test_mask_spm512),
        cmocka_unit_test(test_mask_bpe32k),
        cmocka_unit_test(test_mask_bpe102k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
