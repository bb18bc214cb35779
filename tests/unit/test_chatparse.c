/*
 * test_chatparse.c: src/chat/chatparse.c. The outputs are written out as the
 * model families emit them (markers as their chat templates in
 * ../shared/templates write them). Each is parsed whole, then fed split at
 * every byte offset, at every pair of offsets (short ones), and a byte at a
 * time: every way must give the same message, since the server's stream is
 * the concatenation of the deltas and must equal its non-streaming answer.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chatparse.h"
#include "util/testutil.h"

struct want_call {
    const char *name;
    const char *args;
    const char *id; /* NULL: a generated one */
};

static struct chatparse_format fmt(enum chatparse_tools t, const char *open, const char *close)
{
    return (struct chatparse_format){.tools = t, .think_open = open, .think_close = close};
}

static const struct chatparse_format hermes_think = {CHATPARSE_TOOLS_HERMES, "<think>", "</think>"};

/* True when s[0, n) ends inside a UTF-8 character. */
static bool cut_utf8(const char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k;
    }
    return false;
}

/*
 * Checks the stream shape of one feed's deltas: text never empty nor cut inside a UTF-8
 * character (before the finish), a call's arguments come after its start, indexes count up.
 */
static void check_shape(const struct chatparse_deltas *d, int32_t *n_started, bool final)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct chatparse_delta *e = &d->v[i];
        if (e->kind == CHATPARSE_TOOL_START) {
            assert_int_equal(e->index, *n_started);
            assert_non_null(e->id);
            assert_non_null(e->name);
            assert_true(e->name[0] && e->id[0]);
            (*n_started)++;
        } else {
            assert_non_null(e->text);
            assert_true(e->text_len > 0);
            if (e->kind == CHATPARSE_TOOL_ARGS)
                assert_true(e->index >= 0 && e->index < *n_started);
            else
                assert_int_equal(e->index, -1);
            if (!final && e->kind != CHATPARSE_TOOL_ARGS)
                assert_false(cut_utf8(e->text, e->text_len));
        }
    }
}

/* Parses text fed in the pieces that the cut offsets (ascending, n_cuts of them) make. */
static void parse(const struct chatparse_format *f, const struct chatparse_opts *o,
                  const char *text, size_t len, const size_t *cuts, size_t n_cuts,
                  struct chatparse_msg *msg, bool *has_calls)
{
    struct chatparse *p       = chatparse_new(f, o);
    struct chatparse_deltas d = {0};
    int32_t n_started         = 0;
    size_t at                 = 0;
    assert_non_null(p);
    memset(msg, 0, sizeof *msg);
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        assert_int_equal(chatparse_feed(p, text + at, to - at, &d), HEARTH_OK);
        check_shape(&d, &n_started, false);
        assert_int_equal(chatparse_msg_add(msg, &d), HEARTH_OK);
        chatparse_deltas_clear(&d);
        at = to;
    }
    assert_int_equal(chatparse_finish(p, &d), HEARTH_OK);
    check_shape(&d, &n_started, true);
    assert_int_equal(chatparse_msg_add(msg, &d), HEARTH_OK);
    assert_int_equal(chatparse_feed(p, "x", 1, &d), HEARTH_EINVAL);
    *has_calls = chatparse_has_tool_calls(p);
    assert_int_equal(*has_calls, msg->n_calls > 0);
    chatparse_deltas_free(&d);
    chatparse_free(p);
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

static bool msg_equal(const struct chatparse_msg *a, const struct chatparse_msg *b)
{
    if (strcmp(or_empty(a->reasoning), or_empty(b->reasoning)) ||
        strcmp(or_empty(a->content), or_empty(b->content)) || a->n_calls != b->n_calls)
        return false;
    for (size_t i = 0; i < a->n_calls; i++)
        if (strcmp(a->calls[i].id, b->calls[i].id) || strcmp(a->calls[i].name, b->calls[i].name) ||
            strcmp(a->calls[i].arguments, b->calls[i].arguments))
            return false;
    return true;
}

static void print_msg(const char *label, const struct chatparse_msg *m)
{
    print_message("%s: reasoning [%s]\n  content [%s]\n", label, or_empty(m->reasoning),
                  or_empty(m->content));
    for (size_t i = 0; i < m->n_calls; i++)
        print_message("  call %zu: %s %s %s\n", i, m->calls[i].id, m->calls[i].name,
                      m->calls[i].arguments);
}

/*
 * Parses text whole and checks the message against the wanted one, then checks that every
 * chunking gives the same message.
 */
static void expect_opts(const struct chatparse_format *f, const struct chatparse_opts *o,
                        const char *text, const char *reasoning, const char *content,
                        const struct want_call *calls, size_t n_calls)
{
    size_t len = strlen(text);
    struct chatparse_msg whole;
    bool has;
    parse(f, o, text, len, NULL, 0, &whole, &has);
    bool ok = !strcmp(or_empty(whole.reasoning), or_empty(reasoning)) &&
              !strcmp(or_empty(whole.content), or_empty(content)) && whole.n_calls == n_calls;
    for (size_t i = 0; ok && i < n_calls; i++)
        ok = !strcmp(whole.calls[i].name, calls[i].name) &&
             !strcmp(whole.calls[i].arguments, calls[i].args) &&
             (calls[i].id ? !strcmp(whole.calls[i].id, calls[i].id)
                          : (f->tools == CHATPARSE_TOOLS_MISTRAL
                                 ? strlen(whole.calls[i].id) == 9
                                 : !strncmp(whole.calls[i].id, "call_", 5) &&
                                       strlen(whole.calls[i].id) == 29));
    if (!ok) {
        print_message("text [%s]\n", text);
        print_msg("got", &whole);
        print_message("want: reasoning [%s]\n  content [%s]\n", or_empty(reasoning),
                      or_empty(content));
        for (size_t i = 0; i < n_calls; i++)
            print_message("  call %zu: %s %s %s\n", i, or_empty(calls[i].id), calls[i].name,
                          calls[i].args);
    }
    assert_true(ok);

    struct chatparse_msg m = {0};
    assert_int_equal(chatparse_parse(f, o, text, len, &m, &has), HEARTH_OK);
    assert_true(msg_equal(&m, &whole));
    assert_int_equal(has, n_calls > 0);
    chatparse_msg_free(&m);
    size_t *cuts = malloc((len + 1) * sizeof *cuts);
    assert_non_null(cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    parse(f, o, text, len, cuts, len, &m, &has); /* a byte at a time */
    if (!msg_equal(&m, &whole)) {
        print_message("byte by byte differs for [%s]\n", text);
        print_msg("stream", &m);
    }
    assert_true(msg_equal(&m, &whole));
    chatparse_msg_free(&m);
    for (size_t i = 0; i <= len; i++) {
        parse(f, o, text, len, &i, 1, &m, &has);
        if (!msg_equal(&m, &whole)) {
            print_message("split at %zu differs for [%s]\n", i, text);
            print_msg("stream", &m);
        }
        assert_true(msg_equal(&m, &whole));
        chatparse_msg_free(&m);
    }
    if (len <= 200)
        for (size_t i = 0; i <= len; i++)
            for (size_t j = i; j <= len; j++) {
                size_t c[2] = {i, j};
                parse(f, o, text, len, c, 2, &m, &has);
                if (!msg_equal(&m, &whole)) {
                    print_message("split at %zu, %zu differs for [%s]\n", i, j, text);
                    print_msg("stream", &m);
                }
                assert_true(msg_equal(&m, &whole));
                chatparse_msg_free(&m);
            }
    free(cuts);
    chatparse_msg_free(&whole);
}

static const struct chatparse_opts defaults = {
    .parse_tools = true, .split_reasoning = true, .id_seed = 42};
static const struct chatparse_opts in_think = {
    .parse_tools = true, .split_reasoning = true, .start_in_reasoning = true, .id_seed = 42};

static void expect(const struct chatparse_format *f, const char *text, const char *reasoning,
                   const char *content, const struct want_call *calls, size_t n_calls)
{
    expect_opts(f, &defaults, text, reasoning, content, calls, n_calls);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------- Hermes / Qwen --- */

static void test_qwen3_think_then_call(void **state)
{
    (void)state;
    static const struct want_call c[] = {
        {"get_weather", "{\"location\":\"Paris, France\",\"unit\":\"celsius\"}", NULL}};
    expect(&hermes_think,
           "<think>\nThe user wants the current weather in Paris. I should call get_weather "
           "with location \"Paris, France\".\n</think>\n\n<tool_call>\n{\"name\": "
           "\"get_weather\", \"arguments\": {\"location\": \"Paris, France\", \"unit\": "
           "\"celsius\"}}\n</tool_call>",
           "The user wants the current weather in Paris. I should call get_weather with "
           "location \"Paris, France\".",
           NULL, c, N(c));
    /* Qwen3 answering without a call */
    expect(&hermes_think, "<think>\nSimple greeting.\n</think>\n\nHello! How can I help?\n",
           "Simple greeting.", "Hello! How can I help?", NULL, 0);
    /* the prompt closed an empty block (enable_thinking false): content from the start */
    expect(&hermes_think, "Hi there.", NULL, "Hi there.", NULL, 0);
}

static void test_qwen25_parallel_calls(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
    static const struct want_call c[] = {
        {"get_weather", "{\"city\":\"Paris\"}", NULL},
        {"get_time", "{\"timezone\":\"Europe/Paris\"}", NULL},
    };
    const char *two = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
                      "\"arguments\": {\"timezone\": \"Europe/Paris\"}}\n</tool_call>";
    expect(&f, two, NULL, NULL, c, N(c));
    char text[512];
    snprintf(text, sizeof text, "I'll look both up.\n\n%s\n", two);
    expect(&f, text, NULL, "I'll look both up.", c, N(c));
    /* content after the calls stays content */
    snprintf(text, sizeof text, "%s\nDone.", two);
    expect(&f, text, NULL, "Done.", c, N(c));
    /* Hermes 2 Pro fine-tunes: arguments written as a JSON string, no arguments at all */
    static const struct want_call s[] = {{"f", "{\"a\":1}", NULL}, {"g", "{}", NULL}};
    expect(&f,
           "<tool_call>\n{\"arguments\": \"{\\\"a\\\": 1}\", \"name\": \"f\"}\n</tool_call>\n"
           "<tool_call>{\"name\": \"g\"}</tool_call>",
           NULL, NULL, s, N(s));
}

static void test_non_ascii_arguments(void **state)
{
    (void)state;
    static const struct want_call c[] = {
        {"translate", "{\"text\":\"Grüße aus Zürich\",\"to\":\"日本語\",\"note\":\"München ☀\"}",
         NULL}};
    expect(&hermes_think,
           "<think>\nÜbersetzung nach Japanisch — 日本語.\n</think>\n\n<tool_call>\n{\"name\": "
           "\"translate\", \"arguments\": {\"text\": \"Grüße aus Zürich\", \"to\": \"日本語\", "
           "\"note\": \"M\\u00fcnchen \\u2600\"}}\n</tool_call>",
           "Übersetzung nach Japanisch — 日本語.", NULL, c, N(c));
    expect(&hermes_think, "Ça va très bien, merci ! 🙂", NULL,
           "Ça va très bien, merci ! 🙂", NULL, 0);
}

static void test_hermes_malformed_stays_text(void **state)
{
    (void)state;
    struct chatparse_format f = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
    const char *bad = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>";
    expect(&f, bad, NULL, bad, NULL, 0);
    const char *unterminated = "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}";
    expect(&f, unterminated, NULL, unterminated, NULL, 0);
    expect(&f, "<tool_callx>hi</tool_callx> and <tool_call", NULL,
           "<tool_callx>hi</tool_callx> and <tool_call", NULL, 0);
    /* no name, arguments not an object, trailing garbage */
    const char *noname = "<tool_call>{\"arguments\": {}}</tool_call>";
    expect(&f, noname, NULL, noname, NULL, 0);
    const char *array = "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>";
    expect(&f, array, NULL, array, NULL, 0);
    const char *extra = "<tool_call>{\"name\": \"f\", \"arguments\": {}} x</tool_call>";
    expect(&f, extra, NULL, extra, NULL, 0);
    /* a bad call is text, and the parse goes on after its marker */
    static const struct want_call c[] = {{"f", "{\"a\":1}", NULL}};
    expect(&f,
           "<tool_call>oops <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"
           "</tool_call>",
           NULL, "<tool_call>oops", c, N(c));
    /* a lone </think> is content; so is everything when tools are off */
    expect(&hermes_think, "Use </think> to close.", NULL, "Use </think> to close.", NULL, 0);
    struct chatparse_opts off = {.split_reasoning = true};
    const char *call          = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    expect_opts(&f, &off, call, NULL, call, NULL, 0);
}

/* Whole text and 7-byte chunks agree (for texts too long for expect's every split). */
static void expect_same_chunked(const struct chatparse_format *f, const struct chatparse_opts *o,
                                const char *text, size_t len, struct chatparse_msg *whole)
{
    size_t n_cuts = len / 7, *cuts = malloc((n_cuts + 1) * sizeof *cuts);
    bool has;
    assert_non_null(cuts);
    for (size_t i = 0; i < n_cuts; i++)
        cuts[i] = 7 * (i + 1);
    struct chatparse_msg m;
    parse(f, o, text, len, NULL, 0, whole, &has);
    parse(f, o, text, len, cuts, n_cuts, &m, &has);
    assert_true(msg_equal(&m, whole));
    chatparse_msg_free(&m);
    free(cuts);
}

static void test_call_cap(void **state)
{
    (void)state;
    /* the default cap, 1 MiB from the marker to the end of the call */
    size_t len = CHATPARSE_CALL_MAX + 64;
    char *text = malloc(len + 1);
    assert_non_null(text);
    for (int over = 0; over < 2; over++) {
        const char *head = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"";
        const char *tail = "\"}}</tool_call>";
        size_t n         = over ? len : CHATPARSE_CALL_MAX;
        size_t hl = strlen(head), tl = strlen(tail);
        memcpy(text, head, hl);
        memset(text + hl, 'x', n - hl - tl);
        memcpy(text + n - tl, tail, tl);
        text[n]                   = 0;
        struct chatparse_format h = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
        struct chatparse_msg whole;
        expect_same_chunked(&h, NULL, text, n, &whole);
        assert_int_equal(whole.n_calls, over ? 0 : 1);
        assert_int_equal(whole.content_len, over ? n : 0);
        chatparse_msg_free(&whole);
    }
    free(text);

    struct chatparse_format f = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
    struct chatparse_opts o   = {.parse_tools = true, .call_max = 48};
    const char *big =
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"0123456789\"}}</tool_call>";
    expect_opts(&f, &o, big, NULL, big, NULL, 0);
    static const struct want_call c[] = {{"f", "{}", NULL}};
    expect_opts(&f, &o, "<tool_call>{\"name\": \"f\"}</tool_call>", NULL, NULL, c, N(c));
}

/* Output made of markers that never close costs linear time, and stays text. */
static void test_marker_floods(void **state)
{
    (void)state;
    static const struct {
        enum chatparse_tools tools;
        const char *unit;
    } floods[] = {
        {CHATPARSE_TOOLS_HERMES, "<tool_call>"},
        {CHATPARSE_TOOLS_QWEN3_CODER, "<tool_call>\n<function=f>"},
        {CHATPARSE_TOOLS_MISTRAL, "[TOOL_CALLS]["},
        {CHATPARSE_TOOLS_MISTRAL, "[TOOL_CALLS]f[ARGS]{"},
        {CHATPARSE_TOOLS_DEEPSEEK_R1, "<｜tool▁calls▁begin｜>"},
    };
    for (size_t k = 0; k < N(floods); k++) {
        size_t ulen = strlen(floods[k].unit), reps = 200000 / ulen, len = reps * ulen;
        char *text = malloc(len + 1);
        assert_non_null(text);
        for (size_t i = 0; i < reps; i++)
            memcpy(text + i * ulen, floods[k].unit, ulen);
        text[len]                 = 0;
        struct chatparse_format f = fmt(floods[k].tools, NULL, NULL);
        struct chatparse_opts o   = {.parse_tools = true, .call_max = 4096};
        struct chatparse_msg whole;
        expect_same_chunked(&f, &o, text, len, &whole);
        assert_int_equal(whole.n_calls, 0);
        assert_int_equal(whole.content_len, len);
        chatparse_msg_free(&whole);
        free(text);
    }
    /* nor does a long run of whitespace (held until what follows it is known) */
    size_t len = 300000;
    char *ws   = malloc(len + 1);
    assert_non_null(ws);
    for (size_t i = 0; i < len; i++)
        ws[i] = " \n"[i % 2];
    ws[0]                     = 'a';
    ws[len - 1]               = 'b';
    ws[len]                   = 0;
    struct chatparse_format h = fmt(CHATPARSE_TOOLS_HERMES, "<think>", "</think>");
    struct chatparse_msg whole;
    expect_same_chunked(&h, NULL, ws, len, &whole);
    assert_string_equal(whole.content, ws);
    chatparse_msg_free(&whole);
    ws[len - 1] = ' ';
    expect_same_chunked(&h, NULL, ws, len, &whole);
    assert_string_equal(whole.content, "a");
    chatparse_msg_free(&whole);
    free(ws);
    /* an unclosed marker mentioned before a real call does not hide the call */
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
    static const struct want_call c[] = {{"f", "{}", NULL}};
    expect(&f, "Calls look like <tool_call> ... then:\n<tool_call>{\"name\": \"f\"}</tool_call>",
           NULL, "Calls look like <tool_call> ... then:", c, N(c));
    /* past the budget of rejected bytes (4 calls of call_max), markers are text even where
     * a call would parse */
    struct chatparse_opts small = {.parse_tools = true, .call_max = 40};
    const char *x40             = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    const char *call            = "<tool_call>{\"name\": \"f\"}</tool_call>";
    char text[512];
    snprintf(text, sizeof text, "<tool_call>%s<tool_call>%s<tool_call>%s%s", x40, x40, x40, call);
    char want[512];
    snprintf(want, sizeof want, "<tool_call>%s<tool_call>%s<tool_call>%s", x40, x40, x40);
    expect_opts(&f, &small, text, NULL, want, c, N(c));
    snprintf(text, sizeof text, "<tool_call>%s<tool_call>%s<tool_call>%s<tool_call>%s%s", x40, x40,
             x40, x40, call);
    expect_opts(&f, &small, text, NULL, text, NULL, 0);
}

/* ------------------------------------------------------------ Qwen3-Coder --- */

static void test_qwen3_coder_xml(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_QWEN3_CODER, NULL, NULL);
    static const struct want_call c[] = {
        {"get_weather", "{\"city\":\"San Francisco\",\"days\":3}", NULL}};
    expect(&f,
           "I'll check the forecast.\n<tool_call>\n<function=get_weather>\n<parameter=city>\n"
           "San Francisco\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
           "</tool_call>",
           NULL, "I'll check the forecast.", c, N(c));
    static const struct want_call w[] = {
        {"write_file",
         "{\"path\":\"a.py\",\"content\":\"def f():\\n    return 1\",\"opts\":{\"mode\":"
         "\"w\"},\"tags\":[1,true,null],\"quoted\":\"\\\"x\\\"\"}",
         NULL},
        {"ls", "{}", NULL},
    };
    expect(&f,
           "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n"
           "<parameter=content>\ndef f():\n    return 1\n</parameter>\n<parameter=opts>\n"
           "{\"mode\": \"w\"}\n</parameter>\n<parameter=tags>\n[1, true, null]\n</parameter>\n"
           "<parameter=quoted>\n\"x\"\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
           "<function=ls>\n</function>\n</tool_call>",
           NULL, NULL, w, N(w));
    /* Qwen3.5: the prompt opened <think>, then the XML call */
    struct chatparse_format f35       = fmt(CHATPARSE_TOOLS_QWEN3_CODER, "<think>", "</think>");
    static const struct want_call s[] = {{"search", "{\"query\":\"hearth llm\"}", NULL}};
    expect_opts(&f35, &in_think,
                "I need to search.\n</think>\n\n<tool_call>\n<function=search>\n"
                "<parameter=query>\nhearth llm\n</parameter>\n</function>\n</tool_call>",
                "I need to search.", NULL, s, N(s));
    const char *nofn = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>";
    expect(&f, nofn, NULL, nofn, NULL, 0);
    const char *noparam = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>";
    expect(&f, noparam, NULL, noparam, NULL, 0);
    /* the JSON body of Hermes is taken in the XML format too, and the other way round */
    static const struct want_call j[] = {{"f", "{\"a\":1}", NULL}};
    expect(&f, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", NULL,
           NULL, j, N(j));
    struct chatparse_format h = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
    expect(&h,
           "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
           NULL, NULL, j, N(j));
}

/* --------------------------------------------------------------- Llama 3 --- */

static void test_llama3_json(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_LLAMA3, NULL, NULL);
    static const struct want_call c[] = {{"get_weather", "{\"city\":\"Paris\"}", NULL}};
    expect(&f, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", NULL, NULL, c,
           N(c));
    expect(&f, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
           NULL, NULL, c, N(c));
    expect(&f,
           "\n{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": "
           "\"Paris\"}}",
           NULL, NULL, c, N(c));
    static const struct want_call two[] = {{"a", "{\"x\":\"}{\"}", NULL}, {"b", "{}", NULL}};
    expect(&f,
           "{\"name\": \"a\", \"parameters\": {\"x\": \"}{\"}}; {\"name\": \"b\", "
           "\"parameters\": {}}",
           NULL, NULL, two, N(two));
    /* braces later in the content, or JSON that is no call, are content */
    expect(&f, "The set {1, 2} has two elements.", NULL, "The set {1, 2} has two elements.", NULL,
           0);
    expect(&f, "{\"answer\": 42}", NULL, "{\"answer\": 42}", NULL, 0);
    expect(&f, "{\"name\": \"Bob\"}", NULL, "{\"name\": \"Bob\"}", NULL, 0);
    expect(&f, "{\"name\": \"f\", \"parameters\": {", NULL, "{\"name\": \"f\", \"parameters\": {",
           NULL, 0);
    expect(&f, "<|python_tag|>brave_search.call(query=\"x\")", NULL,
           "<|python_tag|>brave_search.call(query=\"x\")", NULL, 0);
    expect(&f, "{\"name\": \"a\", \"parameters\": {}}; and then", NULL, "; and then",
           (const struct want_call[]){{"a", "{}", NULL}}, 1);
}

/* --------------------------------------------------------------- Mistral --- */

static void test_mistral(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_MISTRAL, NULL, NULL);
    static const struct want_call c[] = {
        {"get_weather", "{\"city\":\"Paris\"}", "a1B2c3D4e"},
        {"get_time", "{}", NULL},
    };
    /* Mistral Nemo / Small 3 */
    expect(&f,
           "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
           "\"id\": \"a1B2c3D4e\"}, {\"name\": \"get_time\", \"arguments\": {}}]",
           NULL, NULL, c, N(c));
    /* an id not fit to pass on is replaced */
    static const struct want_call odd[] = {{"f", "{}", NULL}};
    expect(&f, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": \"a b\\n\"}]", NULL, NULL,
           odd, N(odd));
    /* Devstral / Ministral 3 */
    static const struct want_call d[] = {
        {"get_weather", "{\"city\":\"Paris\"}", NULL},
        {"get_time", "{\"tz\":\"[ARGS]\"}", NULL},
    };
    expect(&f,
           "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time"
           "[ARGS]{\"tz\": \"[ARGS]\"}",
           NULL, "Checking.", d, N(d));
    /* Mistral Small 3.2 */
    static const struct want_call s[] = {{"get_weather", "{\"city\":\"Paris\"}", "Xy12AbC9z"}};
    expect(&f, "[TOOL_CALLS]get_weather[CALL_ID]Xy12AbC9z[ARGS]{\"city\": \"Paris\"}", NULL, NULL,
           s, N(s));
    /* Ministral 3 Reasoning: [THINK] markers */
    struct chatparse_format r = fmt(CHATPARSE_TOOLS_MISTRAL, "[THINK]", "[/THINK]");
    expect(&r,
           "[THINK]The user wants Paris.[/THINK][TOOL_CALLS]get_weather[ARGS]{\"city\": "
           "\"Paris\"}",
           "The user wants Paris.", NULL, d, 1);
    const char *bad[] = {
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {]",
        "[TOOL_CALLS][]",
        "[TOOL_CALLS]f[ARGS][1]",
        "[TOOL_CALLS]f[ARG]{}",
        "[TOOL_CALLS]f[ARGS]{\"a\": 1",
        "[TOOL_CALLS]f g",
    };
    for (size_t i = 0; i < N(bad); i++)
        expect(&f, bad[i], NULL, bad[i], NULL, 0);
}

/* -------------------------------------------------------------- DeepSeek --- */

static void test_deepseek_r1(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_DEEPSEEK_R1, "<think>", "</think>");
    static const struct want_call c[] = {
        {"get_weather", "{\"city\":\"Paris\"}", NULL},
        {"get_time", "{\"tz\":\"CET\"}", NULL},
    };
    expect_opts(&f, &in_think,
                "Okay, the user wants the weather and the time in Paris.\n</think>\n\n"
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
                "```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>"
                "function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"CET\"}\n```"
                "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                "Okay, the user wants the weather and the time in Paris.", NULL, c, N(c));
    /* no </think>: it all is reasoning; an opening <think> the model repeats is dropped */
    expect_opts(&f, &in_think, "<think>\nStill thinking about 東京", "Still thinking about 東京",
                NULL, NULL, 0);
    const char *open = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n"
                       "```json\n{}\n```<｜tool▁call▁end｜>";
    expect(&f, open, NULL, open, NULL, 0);
    const char *bad = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n"
                      "```json\n{x}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    expect(&f, bad, NULL, bad, NULL, 0);
}

static void test_deepseek_v31(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_DEEPSEEK_V31, "<think>", "</think>");
    static const struct want_call c[] = {{"get_weather", "{\"city\":\"Paris\"}", NULL}};
    expect(&f,
           "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
           "{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
           NULL, "Let me check.", c, N(c));
    expect_opts(&f, &in_think,
                "Weather lookup.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
                "<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                "Weather lookup.", NULL, c, N(c));
}

/* -------------------------------------------------------------- reasoning --- */

static void test_reasoning_rules(void **state)
{
    (void)state;
    expect_opts(&hermes_think, &in_think, "All of this is reasoning <b>",
                "All of this is reasoning <b>", NULL, NULL, 0);
    expect_opts(&hermes_think, &in_think, "\n\nx\n</think>\n\n", "x", NULL, NULL, 0);
    /* <think> opens reasoning only at the start of the output */
    expect(&hermes_think, "Hi <think>x</think>", NULL, "Hi <think>x</think>", NULL, 0);
    /* reasoning_format "none": markers are content */
    struct chatparse_opts none = {.parse_tools = true};
    expect_opts(&hermes_think, &none, "<think>\nhmm\n</think>\n\nYes.", NULL,
                "<think>\nhmm\n</think>\n\nYes.", NULL, 0);
    /* tool markers inside reasoning are reasoning */
    expect(&hermes_think, "<think><tool_call>{\"name\": \"f\"}</tool_call></think>ok",
           "<tool_call>{\"name\": \"f\"}</tool_call>", "ok", NULL, 0);
}

static void test_prompt_opens_thinking(void **state)
{
    (void)state;
    const char *r1  = "<｜User｜>Hi<｜Assistant｜><think>\n";
    const char *off = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    const char *old = "<|im_start|>assistant\n<think>\na\n</think>\n\nb<|im_end|>\n"
                      "<|im_start|>assistant\n";
    assert_true(chatparse_prompt_opens_thinking(&hermes_think, r1, strlen(r1)));
    assert_false(chatparse_prompt_opens_thinking(&hermes_think, off, strlen(off)));
    assert_false(chatparse_prompt_opens_thinking(&hermes_think, old, strlen(old)));
    assert_false(chatparse_prompt_opens_thinking(&hermes_think, "", 0));
    struct chatparse_format plain = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
    assert_false(chatparse_prompt_opens_thinking(&plain, r1, strlen(r1)));
}

/* The deltas' stream shape: start (id, name), then the arguments; ids follow the seed. */
static void test_stream_shape_and_ids(void **state)
{
    (void)state;
    struct chatparse_format f = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
    const char *text = "Hi <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>";
    char first[64]   = "";
    for (int run = 0; run < 3; run++) {
        struct chatparse_opts o   = {.parse_tools = true, .id_seed = run < 2 ? 7 : 8};
        struct chatparse *p       = chatparse_new(&f, &o);
        struct chatparse_deltas d = {0};
        assert_int_equal(chatparse_feed(p, text, strlen(text), &d), HEARTH_OK);
        assert_int_equal(d.n, 3);
        assert_int_equal(d.v[0].kind, CHATPARSE_CONTENT);
        assert_string_equal(d.v[0].text, "Hi");
        assert_int_equal(d.v[1].kind, CHATPARSE_TOOL_START);
        assert_int_equal(d.v[1].index, 0);
        assert_string_equal(d.v[1].name, "f");
        assert_int_equal(d.v[2].kind, CHATPARSE_TOOL_ARGS);
        assert_string_equal(d.v[2].text, "{\"a\":1}");
        assert_true(chatparse_has_tool_calls(p));
        if (run == 0)
            snprintf(first, sizeof first, "%s", d.v[1].id);
        else if (run == 1)
            assert_string_equal(d.v[1].id, first);
        else
            assert_string_not_equal(d.v[1].id, first);
        chatparse_deltas_clear(&d);
        assert_int_equal(chatparse_finish(p, &d), HEARTH_OK);
        assert_int_equal(d.n, 0);
        chatparse_deltas_free(&d);
        chatparse_free(p);
    }
    /* a list the caller keeps across feeds: what it held is left alone */
    {
        struct chatparse *q       = chatparse_new(&f, NULL);
        struct chatparse_deltas l = {0};
        assert_int_equal(chatparse_feed(q, "Hello", 5, &l), HEARTH_OK);
        assert_int_equal(chatparse_feed(q, " world", 6, &l), HEARTH_OK);
        assert_int_equal(chatparse_finish(q, &l), HEARTH_OK);
        assert_int_equal(l.n, 2);
        assert_string_equal(l.v[0].text, "Hello");
        assert_string_equal(l.v[1].text, " world");
        chatparse_deltas_free(&l);
        chatparse_free(q);
    }
    /* text that may be a marker waits; then goes out whole */
    struct chatparse *p       = chatparse_new(&f, NULL);
    struct chatparse_deltas d = {0};
    assert_int_equal(chatparse_feed(p, "a <tool_c", 9, &d), HEARTH_OK);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].text, "a");
    chatparse_deltas_clear(&d);
    assert_int_equal(chatparse_feed(p, "all", 3, &d), HEARTH_OK);
    assert_int_equal(d.n, 0);
    assert_int_equal(chatparse_feed(p, "s", 1, &d), HEARTH_OK);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].text, " <tool_calls");
    assert_false(chatparse_has_tool_calls(p));
    chatparse_deltas_free(&d);
    chatparse_free(p);
}

/* ------------------------------------------------------ the other families --- */

static void test_harmony(void **state)
{
    (void)state;
    static const struct chatparse_format f = {CHATPARSE_TOOLS_HARMONY,
                                              "<|channel|>analysis<|message|>", "<|end|>"};
    /* gpt-oss answers: analysis, then final; the prompt ended in <|start|>assistant */
    expect(&f,
           "<|channel|>analysis<|message|>User asks 2+2. Simple.<|end|><|start|>assistant"
           "<|channel|>final<|message|>2 + 2 = 4.<|return|>",
           "User asks 2+2. Simple.", "2 + 2 = 4.", NULL, 0);
    /* a call as the template writes it, and as the model often does (to= after the channel) */
    static const struct want_call c[] = {{"get_weather", "{\"city\":\"Paris\"}", NULL}};
    expect(&f,
           "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant to=functions."
           "get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>",
           "Need weather.", NULL, c, N(c));
    expect(&f,
           "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>"
           "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}"
           "<|call|>",
           "Need weather.", NULL, c, N(c));
    /* a commentary preamble is content; reasoning_format none puts analysis in content */
    expect(&f,
           "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions."
           "get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\"}",
           NULL, "Checking.", c, N(c));
    struct chatparse_opts o = defaults;
    o.split_reasoning       = false;
    expect_opts(&f, &o,
                "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>final"
                "<|message|>Hi.",
                NULL, "Hmm.Hi.", NULL, 0);
    /* without tools the channels still split, and a call stays text */
    o             = defaults;
    o.parse_tools = false;
    expect_opts(&f, &o,
                "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final"
                "<|message|>y",
                "x", "y", NULL, 0);
    const char *call_text = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"
                            "{\"a\":1}";
    expect_opts(&f, &o, call_text, NULL, call_text, NULL, 0);
    /* malformed: no JSON, an unknown channel, another recipient */
    const char *bad = "<|channel|>commentary to=functions.f json<|message|>not json";
    expect(&f, bad, NULL, bad, NULL, 0);
    expect(&f, "<|channel|>weird<|message|>x", NULL, "<|channel|>weird<|message|>x", NULL, 0);
    const char *py = "<|channel|>analysis to=python code<|message|>print(1)";
    expect(&f, py, NULL, py, NULL, 0);
}

static void test_glm(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_GLM, "<think>", "</think>");
    static const struct want_call c[] = {
        {"get_weather", "{\"city\":\"Beijing\",\"days\":2,\"units\":{\"t\":\"C\"}}", NULL},
        {"get_time", "{\"tz\":\"Asia/Shanghai\"}", NULL},
    };
    /* GLM 4.6: the name, then one pair per line */
    expect(&f,
           "<think>Weather and time.</think>\nLet me look.\n<tool_call>get_weather\n"
           "<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>days</arg_key>\n"
           "<arg_value>2</arg_value>\n<arg_key>units</arg_key>\n<arg_value>{\"t\": \"C\"}"
           "</arg_value>\n</tool_call>\n<tool_call>get_time\n<arg_key>tz</arg_key>\n"
           "<arg_value>Asia/Shanghai</arg_value>\n</tool_call>",
           "Weather and time.", "Let me look.", c, N(c));
    /* GLM 4.7: all on one line; a call without arguments */
    static const struct want_call d[] = {{"f", "{\"s\":\"a b\\nc\"}", NULL}, {"g", "{}", NULL}};
    expect(&f,
           "<tool_call>f<arg_key>s</arg_key><arg_value>a b\nc</arg_value></tool_call>"
           "<tool_call>g</tool_call>",
           NULL, NULL, d, N(d));
    const char *nokey = "<tool_call>f<arg_value>1</arg_value></tool_call>";
    expect(&f, nokey, NULL, nokey, NULL, 0);
    const char *noval = "<tool_call>f<arg_key>a</arg_key></tool_call>";
    expect(&f, noval, NULL, noval, NULL, 0);
    const char *noname = "<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>";
    expect(&f, noname, NULL, noname, NULL, 0);
}

static void test_kimi(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_KIMI, "<think>", "</think>");
    static const struct want_call c[] = {
        {"get_weather", "{\"city\":\"Tokyo\"}", NULL},
        {"search", "{\"q\":\"東京 天気\"}", NULL},
    };
    expect(&f,
           "<think>Two calls.</think>Sure.<|tool_calls_section_begin|><|tool_call_begin|>"
           "functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Tokyo\"}"
           "<|tool_call_end|><|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>"
           "{\"q\": \"東京 天気\"}<|tool_call_end|><|tool_calls_section_end|>",
           "Two calls.", "Sure.", c, N(c));
    const char *bad = "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                      "<|tool_call_argument_begin|>{\"a\": }<|tool_call_end|>"
                      "<|tool_calls_section_end|>";
    expect(&f, bad, NULL, bad, NULL, 0);
    const char *empty = "<|tool_calls_section_begin|><|tool_calls_section_end|>";
    expect(&f, empty, NULL, empty, NULL, 0);
}

static void test_minimax(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_MINIMAX, "<think>", "</think>");
    static const struct want_call c[] = {
        {"search_web", "{\"query\":\"MiniMax M2\",\"limit\":5}", NULL},
        {"ls", "{\"path\":\"/tmp\"}", NULL},
    };
    expect(&f,
           "<think>\nSearch first.\n</think>\n\n<minimax:tool_call>\n<invoke name=\"search_web\">\n"
           "<parameter name=\"query\">MiniMax M2</parameter>\n<parameter name=\"limit\">5"
           "</parameter>\n</invoke>\n<invoke name=\"ls\">\n<parameter name=\"path\">/tmp"
           "</parameter>\n</invoke>\n</minimax:tool_call>",
           "Search first.", NULL, c, N(c));
    const char *bad = "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">1\n"
                      "</invoke>\n</minimax:tool_call>";
    expect(&f, bad, NULL, bad, NULL, 0);
}

static void test_seed_oss(void **state)
{
    (void)state;
    struct chatparse_format f = fmt(CHATPARSE_TOOLS_SEED_OSS, "<seed:think>", "</seed:think>");
    static const struct want_call c[] = {
        {"get_weather", "{\"location\":\"Paris\",\"days\":3}", NULL}};
    expect(&f,
           "<seed:think>Weather in Paris.</seed:think>\n<seed:tool_call>\n<function=get_weather>\n"
           "<parameter=location>Paris</parameter>\n<parameter=days>3</parameter>\n</function>\n"
           "</seed:tool_call>",
           "Weather in Paris.", NULL, c, N(c));
    const char *bad = "<seed:tool_call>\n<function=f>\n<parameter=a>1</parameter>\n"
                      "</seed:tool_call>";
    expect(&f, bad, NULL, bad, NULL, 0);
}

static void test_granite(void **state)
{
    (void)state;
    struct chatparse_format f         = fmt(CHATPARSE_TOOLS_GRANITE, NULL, NULL);
    static const struct want_call c[] = {
        {"get_current_weather", "{\"location\":\"Boston, MA\"}", NULL},
        {"get_time", "{}", NULL},
    };
    expect(&f,
           "<|tool_call|>[{\"arguments\": {\"location\": \"Boston, MA\"}, \"name\": "
           "\"get_current_weather\"}, {\"name\": \"get_time\", \"arguments\": {}}]",
           NULL, NULL, c, N(c));
    expect(&f, "<|tool_call|>[] and text", NULL, "<|tool_call|>[] and text", NULL, 0);
    expect(&f, "<|tool_call|>{\"name\": \"f\"}", NULL, "<|tool_call|>{\"name\": \"f\"}", NULL, 0);
}

static void test_functionary(void **state)
{
    (void)state;
    struct chatparse_format f31       = fmt(CHATPARSE_TOOLS_FUNCTIONARY_V31, NULL, NULL);
    static const struct want_call c[] = {{"get_weather", "{\"city\":\"Oslo\"}", NULL}};
    expect(&f31, "Checking.<function=get_weather>{\"city\": \"Oslo\"}</function>", NULL,
           "Checking.", c, N(c));
    const char *bad = "<function=get weather>{\"city\": \"Oslo\"}</function>";
    expect(&f31, bad, NULL, bad, NULL, 0);

    /* v3.2: the prompt ends in >>>, so the first recipient comes bare */
    struct chatparse_format f32       = fmt(CHATPARSE_TOOLS_FUNCTIONARY_V32, NULL, NULL);
    static const struct want_call d[] = {{"get_weather", "{\"city\":\"Oslo\"}", NULL},
                                         {"get_time", "{\"tz\":\"CET\"}", NULL}};
    expect(&f32,
           "all\nLet me check.>>>get_weather\n{\"city\": \"Oslo\"}>>>get_time\n"
           "{\"tz\": \"CET\"}",
           NULL, "Let me check.", d, N(d));
    expect(&f32, "get_weather\n{\"city\": \"Oslo\"}", NULL, NULL, d, 1);
    expect(&f32, "all\nHello there.", NULL, "Hello there.", NULL, 0);
    expect(&f32, "Hello there.", NULL, "Hello there.", NULL, 0);
    expect(&f32, "all\nx>>>f\nnot json", NULL, "x>>>f\nnot json", NULL, 0);
    struct chatparse_opts o = defaults;
    o.parse_tools           = false;
    expect_opts(&f32, &o, "all\nHi.>>>f\n{}", NULL, "Hi.>>>f\n{}", NULL, 0);
}

static void test_command_r(void **state)
{
    (void)state;
    struct chatparse_format f =
        fmt(CHATPARSE_TOOLS_COMMAND_R7B, "<|START_THINKING|>", "<|END_THINKING|>");
    static const struct want_call c[] = {{"get_weather", "{\"city\":\"Lyon\"}", NULL},
                                         {"get_time", "{}", NULL}};
    expect(&f,
           "<|START_THINKING|>I will look up the weather.<|END_THINKING|><|START_ACTION|>[\n"
           "    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": "
           "{\"city\": \"Lyon\"}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"get_time\", "
           "\"parameters\": {}}\n]<|END_ACTION|>",
           "I will look up the weather.", NULL, c, N(c));
    expect(&f, "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>", NULL, "It is sunny.", NULL, 0);
    const char *bad = "<|START_ACTION|>[{\"name\": \"f\"}]<|END_ACTION|>";
    expect(&f, bad, NULL, bad, NULL, 0);

    struct chatparse_format plus = fmt(CHATPARSE_TOOLS_COMMAND_R, NULL, NULL);
    expect(&plus,
           "Action: ```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n        "
           "\"parameters\": {\"city\": \"Lyon\"}\n    }\n]\n```",
           NULL, NULL, c, 1);
    expect(&plus, "Action: take a walk.", NULL, "Action: take a walk.", NULL, 0);
}

static void test_gemma4(void **state)
{
    (void)state;
    struct chatparse_format f = fmt(CHATPARSE_TOOLS_GEMMA4, "<|channel>thought", "<channel|>");
    static const struct want_call c[] = {
        {"get_weather",
         "{\"city\":\"Rome\",\"days\":2,\"opts\":{\"unit\":\"C\"},"
         "\"tags\":[\"a\",true]}",
         NULL},
        {"ping", "{}", NULL},
    };
    expect(&f,
           "<|channel>thought\nRome weather.\n<channel|><|tool_call>call:get_weather{city:<|\"|>"
           "Rome<|\"|>,days:2,opts:{<|\"|>unit<|\"|>:<|\"|>C<|\"|>},tags:[<|\"|>a<|\"|>,true]}"
           "<tool_call|><|tool_call>call:ping{}<tool_call|>",
           "Rome weather.", NULL, c, N(c));
    const char *bad = "<|tool_call>call:f{a:\"json string\"}<tool_call|>";
    expect(&f, bad, NULL, bad, NULL, 0);
    const char *open = "<|tool_call>call:f{a:<|\"|>x}<tool_call|>";
    expect(&f, open, NULL, open, NULL, 0);
}

static void test_values_typed_by_schema(void **state)
{
    (void)state;
    /* without tools a bare "42" reads as a number; a string parameter keeps it a string */
    cJSON *tools = cJSON_Parse(
        "[{\"type\": \"function\", \"function\": {\"name\": \"set\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"code\": {\"type\": \"string\"}, \"n\": {\"type\": "
        "\"integer\"}, \"flag\": {\"type\": \"string\"}}}}}]");
    assert_non_null(tools);
    struct chatparse_opts o   = defaults;
    o.tools                   = tools;
    struct chatparse_format q = fmt(CHATPARSE_TOOLS_QWEN3_CODER, NULL, NULL);
    const char *xml           = "<tool_call>\n<function=set>\n<parameter=code>\n42\n</parameter>\n"
                                "<parameter=n>\n42\n</parameter>\n<parameter=flag>\ntrue\n</parameter>\n"
                                "</function>\n</tool_call>";
    static const struct want_call typed[] = {
        {"set", "{\"code\":\"42\",\"n\":42,\"flag\":\"true\"}", NULL}};
    static const struct want_call looks[] = {{"set", "{\"code\":42,\"n\":42,\"flag\":true}", NULL}};
    expect_opts(&q, &o, xml, NULL, NULL, typed, 1);
    expect(&q, xml, NULL, NULL, looks, 1);
    struct chatparse_format g = fmt(CHATPARSE_TOOLS_GLM, NULL, NULL);
    expect_opts(&g, &o,
                "<tool_call>set<arg_key>code</arg_key><arg_value>42</arg_value><arg_key>n"
                "</arg_key><arg_value>42</arg_value><arg_key>flag</arg_key><arg_value>true"
                "</arg_value></tool_call>",
                NULL, NULL, typed, 1);
    struct chatparse_format mm = fmt(CHATPARSE_TOOLS_MINIMAX, NULL, NULL);
    expect_opts(&mm, &o,
                "<minimax:tool_call><invoke name=\"set\"><parameter name=\"code\">42</parameter>"
                "<parameter name=\"n\">42</parameter><parameter name=\"flag\">true</parameter>"
                "</invoke></minimax:tool_call>",
                NULL, NULL, typed, 1);
    struct chatparse_format sd = fmt(CHATPARSE_TOOLS_SEED_OSS, NULL, NULL);
    expect_opts(&sd, &o,
                "<seed:tool_call><function=set><parameter=code>42</parameter><parameter=n>42"
                "</parameter><parameter=flag>true</parameter></function></seed:tool_call>",
                NULL, NULL, typed, 1);
    cJSON_Delete(tools);
}

/* text ends at the token limit: fed whole and a byte at a time, finished with cut; the
 * content must be want whichever way */
static void expect_cut(const struct chatparse_format *f, const char *text, bool cut,
                       const char *want)
{
    size_t len = strlen(text);
    for (int way = 0; way < 2; way++) {
        struct chatparse *p       = chatparse_new(f, &defaults);
        struct chatparse_deltas d = {0};
        struct chatparse_msg m    = {0};
        assert_non_null(p);
        for (size_t at = 0; at < len; at += way ? 1 : len)
            assert_int_equal(chatparse_feed(p, text + at, way ? 1 : len, &d), HEARTH_OK);
        assert_int_equal(chatparse_finish_cut(p, cut, &d), HEARTH_OK);
        assert_int_equal(chatparse_msg_add(&m, &d), HEARTH_OK);
        if (strcmp(or_empty(m.content), want))
            print_message("cut %d of [%s]: content [%s], want [%s]\n", cut, text,
                          or_empty(m.content), want);
        assert_string_equal(or_empty(m.content), want);
        assert_int_equal(m.n_calls, 0);
        chatparse_msg_free(&m);
        chatparse_deltas_free(&d);
        chatparse_free(p);
    }
}

static void test_cut_call_dropped(void **state)
{
    (void)state;
    static const struct {
        struct chatparse_format f;
        const char *text;
    } cases[] = {
        {{CHATPARSE_TOOLS_HERMES, NULL, NULL},
         "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci"},
        {{CHATPARSE_TOOLS_QWEN3_CODER, NULL, NULL},
         "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"},
        {{CHATPARSE_TOOLS_MISTRAL, NULL, NULL}, "Let me check.[TOOL_CALLS]get_weather[ARGS]{\"ci"},
        {{CHATPARSE_TOOLS_DEEPSEEK_V31, NULL, NULL},
         "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"},
        {{CHATPARSE_TOOLS_HARMONY, NULL, NULL},
         "<|channel|>final<|message|>Let me check.<|end|><|start|>assistant to=functions.get_"},
        {{CHATPARSE_TOOLS_GLM, NULL, NULL}, "Let me check.<tool_call>get_weather<arg_key>ci"},
        {{CHATPARSE_TOOLS_KIMI, NULL, NULL},
         "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"},
        {{CHATPARSE_TOOLS_GEMMA4, NULL, NULL},
         "Let me check.<|tool_call>call:get_weather{city:<|\"|>Pa"},
    };
    for (size_t i = 0; i < N(cases); i++) {
        expect_cut(&cases[i].f, cases[i].text, true, "Let me check.");
        /* stopped for another reason, the open call is text, as before */
        const char *tail = strstr(cases[i].text, "Let me check.") + strlen("Let me check.");
        char want[256];
        while (*tail == '\n')
            tail++;
        if (cases[i].f.tools == CHATPARSE_TOOLS_HARMONY)
            snprintf(want, sizeof want, "Let me check.%s", tail);
        else
            snprintf(want, sizeof want, "Let me check.\n%s", tail);
        if (cases[i].f.tools == CHATPARSE_TOOLS_HERMES ||
            cases[i].f.tools == CHATPARSE_TOOLS_QWEN3_CODER)
            expect_cut(&cases[i].f, cases[i].text, false, want);
    }
    /* an invalid call is text even when cut; so is text with no call */
    struct chatparse_format h = fmt(CHATPARSE_TOOLS_HERMES, NULL, NULL);
    expect_cut(&h, "<tool_call>\n{\"name\": 1}\n</tool_call> and mo", true,
               "<tool_call>\n{\"name\": 1}\n</tool_call> and mo");
    expect_cut(&h, "Just text that ran lo", true, "Just text that ran lo");
    struct chatparse_format m = fmt(CHATPARSE_TOOLS_MISTRAL, NULL, NULL);
    expect_cut(&m, "Note: [TOOL_CALLS] is a marker", true, "Note: [TOOL_CALLS] is a marker");
}

static void test_stream_args(void **state)
{
    (void)state;
    struct chatparse_opts o           = defaults;
    o.stream_args                     = true;
    struct chatparse_format h         = fmt(CHATPARSE_TOOLS_HERMES, "<think>", "</think>");
    static const struct want_call c[] = {
        {"get_weather", "{\"city\": \"Zürich\", \"days\": [1, 2]}", NULL},
        {"get_time", "{}", NULL},
    };
    const char *two = "<think>ok</think>Checking.\n<tool_call>\n{\"name\": \"get_weather\", "
                      "\"arguments\": {\"city\": \"Zürich\", \"days\": [1, 2]}}\n</tool_call>\n"
                      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    expect_opts(&h, &o, two, "ok", "Checking.", c, N(c));
    /* the start goes out with the name, the arguments as they come, no character cut */
    struct chatparse *p       = chatparse_new(&h, &o);
    struct chatparse_deltas d = {0};
    const char *head = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\xc3";
    assert_int_equal(chatparse_feed(p, head, strlen(head), &d), HEARTH_OK);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.v[0].kind, CHATPARSE_TOOL_START);
    assert_string_equal(d.v[0].name, "get_weather");
    assert_int_equal(d.v[1].kind, CHATPARSE_TOOL_ARGS);
    assert_string_equal(d.v[1].text, "{\"city\": \"Z");
    chatparse_deltas_clear(&d);
    assert_int_equal(chatparse_feed(p, "\xbc", 1, &d), HEARTH_OK);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].text, "\xc3\xbc");
    chatparse_deltas_free(&d);
    chatparse_free(p);
    /* a generation that ends inside the arguments leaves the call with what came */
    static const struct want_call cut[] = {{"get_weather", "{\"city\": \"Par", NULL}};
    expect_opts(&h, &o, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
                NULL, NULL, cut, 1);
    /* keys in another order: held whole and printed compactly, as without the flag */
    static const struct want_call w[] = {{"f", "{\"a\":1}", NULL}};
    expect_opts(&h, &o, "<tool_call>\n{\"arguments\": {\"a\": 1}, \"name\": \"f\"}\n</tool_call>",
                NULL, NULL, w, 1);
    /* Llama 3 and Mistral */
    struct chatparse_format l          = fmt(CHATPARSE_TOOLS_LLAMA3, NULL, NULL);
    static const struct want_call ll[] = {{"f", "{\"a\": \"}\"}", NULL}};
    expect_opts(&l, &o, "{\"name\": \"f\", \"parameters\": {\"a\": \"}\"}} ", NULL, NULL, ll, 1);
    expect_opts(&l, &o, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": \"}\"}}", NULL,
                NULL, ll, 1);
    struct chatparse_format m          = fmt(CHATPARSE_TOOLS_MISTRAL, NULL, NULL);
    static const struct want_call mm[] = {{"f", "{\"a\": [1, 2]}", NULL}, {"g", "{}", NULL}};
    expect_opts(&m, &o, "Sure.[TOOL_CALLS]f[ARGS]{\"a\": [1, 2]}[TOOL_CALLS]g[ARGS]{}", NULL,
                "Sure.", mm, N(mm));
    /* Qwen3-Coder's XML body is held whole */
    struct chatparse_format q         = fmt(CHATPARSE_TOOLS_QWEN3_CODER, NULL, NULL);
    static const struct want_call x[] = {{"f", "{\"a\":1}", NULL}};
    expect_opts(&q, &o,
                "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n"
                "</tool_call>",
                NULL, NULL, x, 1);
}

static void test_markers(void **state)
{
    (void)state;
    const char *m[CHATPARSE_MARKERS_MAX];
    struct chatparse_format f = {0};
    assert_int_equal(chatparse_markers(&f, m), 0);
    /* every format's list fits, and holds its reasoning markers first */
    for (int t = 0; t < CHATPARSE_TOOLS_COUNT; t++) {
        f        = fmt((enum chatparse_tools)t, "<think>", "</think>");
        size_t n = chatparse_markers(&f, m);
        assert_true(n >= 2 && n <= CHATPARSE_MARKERS_MAX);
        assert_string_equal(m[0], "<think>");
        for (size_t i = 0; i < n; i++)
            assert_true(m[i][0]);
    }
    chatparse_detect("{{ '<|start|>assistant to=functions.x<|channel|>commentary<|message|>' }}"
                     "<|channel|>analysis<|message|>x<|end|>",
                     &f);
    size_t n   = chatparse_markers(&f, m);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found |= !strcmp(m[i], "<|channel|>");
    assert_true(found);
}

/* -------------------------------------------------------------- detection --- */

static void detect_file(const char *rel, enum chatparse_tools tools, const char *think_open)
{
    const char *path = tu_shared(rel);
    if (!path) {
        print_message("skip: %s not found\n", rel);
        return;
    }
    char *src = tu_read_file(path, NULL);
    assert_non_null(src);
    struct chatparse_format f;
    chatparse_detect(src, &f);
    if (f.tools != tools ||
        (think_open ? !f.think_open || strcmp(f.think_open, think_open) : f.think_open != NULL))
        print_message("%s: got %s, think %s\n", rel, chatparse_tools_name(f.tools),
                      f.think_open ? f.think_open : "none");
    assert_int_equal(f.tools, tools);
    if (think_open)
        assert_string_equal(f.think_open, think_open);
    else
        assert_null(f.think_open);
    free(src);
}

static void test_detect_templates(void **state)
{
    (void)state;
    if (!tu_shared("templates")) {
        print_message("skip: templates not found (set HEARTH_SHARED)\n");
        skip();
    }
    static const struct {
        const char *file;
        enum chatparse_tools tools;
        const char *think;
    } cases[] = {
        {"Qwen-Qwen3-0.6B.jinja", CHATPARSE_TOOLS_HERMES, "<think>"},
        {"Qwen-QwQ-32B.jinja", CHATPARSE_TOOLS_HERMES, "<think>"},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", CHATPARSE_TOOLS_HERMES, NULL},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", CHATPARSE_TOOLS_HERMES, NULL},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", CHATPARSE_TOOLS_HERMES, NULL},
        {"Qwen3-Coder.jinja", CHATPARSE_TOOLS_QWEN3_CODER, NULL},
        {"Qwen3.5-4B.jinja", CHATPARSE_TOOLS_QWEN3_CODER, "<think>"},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", CHATPARSE_TOOLS_LLAMA3, NULL},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", CHATPARSE_TOOLS_LLAMA3, NULL},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", CHATPARSE_TOOLS_LLAMA3, NULL},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", CHATPARSE_TOOLS_MISTRAL, NULL},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", CHATPARSE_TOOLS_MISTRAL, NULL},
        {"unsloth-mistral-Devstral-Small-2507.jinja", CHATPARSE_TOOLS_MISTRAL, NULL},
        {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", CHATPARSE_TOOLS_MISTRAL, "[THINK]"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", CHATPARSE_TOOLS_DEEPSEEK_R1, "<think>"},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", CHATPARSE_TOOLS_DEEPSEEK_R1, "<think>"},
        {"llama-cpp-deepseek-r1.jinja", CHATPARSE_TOOLS_DEEPSEEK_R1, "<think>"},
        {"deepseek-ai-DeepSeek-V3.1.jinja", CHATPARSE_TOOLS_DEEPSEEK_V31, "<think>"},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", CHATPARSE_TOOLS_QWEN3_CODER, "<think>"},
        {"Bielik-11B-v3.0-Instruct.jinja", CHATPARSE_TOOLS_HERMES, "<think>"},
        {"ibm-granite-granite-4.0.jinja", CHATPARSE_TOOLS_HERMES, NULL},
        {"GLM-4.6.jinja", CHATPARSE_TOOLS_GLM, "<think>"},
        {"GLM-4.7-Flash.jinja", CHATPARSE_TOOLS_GLM, "<think>"},
        {"poolside-Laguna-XS.2.jinja", CHATPARSE_TOOLS_GLM, "<think>"},
        {"openai-gpt-oss-120b.jinja", CHATPARSE_TOOLS_HARMONY, "<|channel|>analysis<|message|>"},
        {"moonshotai-Kimi-K2.jinja", CHATPARSE_TOOLS_KIMI, NULL},
        {"Kimi-K2-Thinking.jinja", CHATPARSE_TOOLS_KIMI, "<think>"},
        {"MiniMax-M2.jinja", CHATPARSE_TOOLS_MINIMAX, "<think>"},
        {"ByteDance-Seed-OSS.jinja", CHATPARSE_TOOLS_SEED_OSS, "<seed:think>"},
        {"ibm-granite-granite-3.3-2B-Instruct.jinja", CHATPARSE_TOOLS_GRANITE, "<think>"},
        {"meetkai-functionary-medium-v3.2.jinja", CHATPARSE_TOOLS_FUNCTIONARY_V32, NULL},
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", CHATPARSE_TOOLS_COMMAND_R, NULL},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", CHATPARSE_TOOLS_COMMAND_R7B,
         "<|START_THINKING|>"},
        {"google-gemma-4-31B-it.jinja", CHATPARSE_TOOLS_GEMMA4, "<|channel>thought"},
        {"google-gemma-4-31B-it-interleaved.jinja", CHATPARSE_TOOLS_GEMMA4, "<|channel>thought"},
        {"MiniMax-M3.jinja", CHATPARSE_TOOLS_NONE, NULL},
        {"google-gemma-2-2b-it.jinja", CHATPARSE_TOOLS_NONE, NULL},
        {"microsoft-Phi-3.5-mini-instruct.jinja", CHATPARSE_TOOLS_NONE, NULL},
        {"meetkai-functionary-medium-v3.1.jinja", CHATPARSE_TOOLS_FUNCTIONARY_V31, NULL},
    };
    char rel[256];
    for (size_t i = 0; i < N(cases); i++) {
        snprintf(rel, sizeof rel, "templates/%s", cases[i].file);
        detect_file(rel, cases[i].tools, cases[i].think);
    }
    struct chatparse_format f;
    chatparse_detect(NULL, &f);
    assert_int_equal(f.tools, CHATPARSE_TOOLS_NONE);
    assert_null(f.think_open);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3_think_then_call),
        cmocka_unit_test(test_qwen25_parallel_calls),
        cmocka_unit_test(test_non_ascii_arguments),
        cmocka_unit_test(test_hermes_malformed_stays_text),
        cmocka_unit_test(test_call_cap),
        cmocka_unit_test(test_marker_floods),
        cmocka_unit_test(test_qwen3_coder_xml),
        cmocka_unit_test(test_llama3_json),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_deepseek_r1),
        cmocka_unit_test(test_deepseek_v31),
        cmocka_unit_test(test_reasoning_rules),
        cmocka_unit_test(test_prompt_opens_thinking),
        cmocka_unit_test(test_stream_shape_and_ids),
        cmocka_unit_test(test_harmony),
        cmocka_unit_test(test_glm),
        cmocka_unit_test(test_kimi),
        cmocka_unit_test(test_minimax),
        cmocka_unit_test(test_seed_oss),
        cmocka_unit_test(test_granite),
        cmocka_unit_test(test_functionary),
        cmocka_unit_test(test_command_r),
        cmocka_unit_test(test_gemma4),
        cmocka_unit_test(test_values_typed_by_schema),
        cmocka_unit_test(test_cut_call_dropped),
        cmocka_unit_test(test_stream_args),
        cmocka_unit_test(test_markers),
        cmocka_unit_test(test_detect_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
