/*
 * test_spec.c: speculative decoding in `hearth serve` (--spec ngram), end
 * to end. The judge is `hearth bench --compare` against a server without
 * speculation: the texts must be identical, byte for byte, on echo-shaped
 * prompts where the drafter proposes (and on prose where it rarely does),
 * on stories260K (F32), a quantized model and every other architecture of
 * the shared models; /metrics must show drafts
 * proposed and accepted, so the comparison is not vacuous. At temperature 1
 * the same seed must give the same text with and without speculation
 * (stronger than the same distribution: hearth samples each verified
 * position with the same draws plain decoding makes), and over many seeds
 * the first four sampled tokens pass a chi-square test against plain
 * decoding, which the same test fails on a server whose rule is broken on
 * purpose (HEARTH_SPEC_TEST_BREAK: every draft kept). On a model with
 * recurrent layers the rejected drafts are rolled back from the states kept
 * in the verify batch, with a draft model and with the model's own MTP head.
 * The block drafters (EAGLE-3 on qwen3, DFlash on the hybrid qwen35) are
 * held to the same: greedy and seeded texts, alone and chained after the
 * n-gram drafter, and the chi-square test.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/serveutil.h"
#include "util/testutil.h"

/* Echoed text (the drafter's case) and plain openings. */
static const char prompts[] =
    "Lily had a red ball. Lily had a red ball. Lily had a red ball. Lily had a\n"
    "1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3,\n"
    "Tom said: \"I like the sun.\" Tom said: \"I like the sun.\" Tom said:\n"
    "name: Tim, age: 3; name: Sue, age: 4; name: Bob, age: 5; name:\n"
    "The cat sat on the mat. The dog sat on the log. The cat sat on the\n"
    "Once upon a time\n"
    "One day, a big bird\n";

static const char *const plain_args[] = {"--parallel", "2", "--ctx-size", "512", NULL};
static const char *const spec_args[]  = {"--parallel", "2",           "--ctx-size", "512", "--spec",
                                         "ngram",      "--draft-max", "8",          NULL};

/* A counter of /metrics: its samples summed (over labels), or only those with label when set. */
static double metric_of(const struct srv *s, const char *name, const char *label)
{
    struct http_resp r = http_get(s, "/metrics");
    assert_int_equal(r.status, 200);
    double sum  = 0;
    bool found  = false;
    size_t nlen = strlen(name);
    for (const char *line = r.body; line && *line;
         line             = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, name, nlen) || (line[nlen] != ' ' && line[nlen] != '{'))
            continue;
        const char *end = strchr(line, '\n');
        if (label && !(strstr(line, label) && strstr(line, label) < end))
            continue;
        const char *v = line[nlen] == ' ' ? line + nlen : strchr(line, '}') + 1;
        sum += strtod(v, NULL);
        found = true;
    }
    if (!found)
        fail_msg("/metrics has no %s%s:\n%s", name, label ? label : "", r.body);
    http_resp_free(&r);
    return sum;
}

static double metric(const struct srv *s, const char *name)
{
    return metric_of(s, name, NULL);
}

/* hearth bench A --compare B with the prompts above; its exit status, output printed. */
static int compare(const struct srv *a, const struct srv *b, const char *max_tokens)
{
    char *dir = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/prompts.txt", dir);
    assert_int_equal(tu_write_file(path, prompts, strlen(prompts)), 0);
    const char *argv[] = {tu_bin(),    "bench", a->base,        "--compare", b->base,
                          "--prompts", path,    "--max-tokens", max_tokens,  NULL};
    char *out = NULL, *err = NULL;
    int rc = tu_run(argv, NULL, &out, &err, 600);
    print_message("%s%s", out ? out : "", err ? err : "");
    if (rc == 0 && !strstr(out, "7 prompts: 7 identical"))
        fail_msg("exit 0 without 7 identical prompts");
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
    return rc;
}

/* The same greedy text with and without drafting, and the drafter did propose and land. */
static void same_text(const char *model, const char *max_tokens)
{
    struct srv plain, spec;
    srv_start_opt(&plain, model, plain_args, true);
    srv_start_opt(&spec, model, spec_args, true);
    assert_int_equal(compare(&plain, &spec, max_tokens), 0);
    double drafted   = metric(&spec, "hearth_spec_drafted_tokens_total");
    double accepted  = metric(&spec, "hearth_spec_accepted_tokens_total");
    double forwards  = metric(&spec, "hearth_decode_forwards_total");
    double generated = metric(&spec, "hearth_generated_tokens_total");
    print_message("%s: %.0f drafted, %.0f accepted, %.0f forwards for %.0f tokens\n", model,
                  drafted, accepted, forwards, generated);
    assert_true(drafted > 0);
    assert_true(accepted > 0 && accepted <= drafted);
    /* each accepted draft is a token that took no forward pass of its own */
    assert_true(forwards + accepted <= generated);
    assert_true(metric(&plain, "hearth_spec_drafted_tokens_total") == 0);
    srv_stop(&plain);
    srv_stop(&spec);
}

static void test_greedy_identical_stories(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    same_text(tu_model(SRV_MODEL), "160");
}

/* A quantized model: the verified rows go through the batched kernels, plain decode does not. */
static void test_greedy_identical_quantized(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q4_0.gguf");
    same_text(path, "64");
}

/*
 * Every other architecture of the shared models (Q8_0; Q4_K is the known
 * exception, tests/unit/test_batch_rows.c): qwen2's biases, qwen3's head
 * norms, qwen3moe's experts, gemma3's sliding window, whose cache a
 * rejected draft cuts inside the window, gemma4's layers reading another's
 * K/V. Their random weights still echo
 * the prompts often enough to draft, keep some and reject some.
 */
static void test_greedy_identical_every_architecture(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    static const char *const models[] = {"tiny-qwen2-bpe-q8_0.gguf", "tiny-qwen3-bpe-q8_0.gguf",
                                         "tiny-qwen3moe-bpe-q8_0.gguf", "tiny-gemma3-spm-q8_0.gguf",
                                         "tiny-gemma4-spm-q8_0.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        TU_MODEL_OR_SKIP(path, models[i]);
        same_text(path, "64");
    }
}

/* Temperature 1, top-k and top-p: a seed gives the same text with and without drafting. */
static void test_sampled_same_per_seed(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv plain, spec;
    srv_start(&plain, plain_args);
    srv_start(&spec, spec_args);
    for (int seed = 1; seed <= 6; seed++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"prompt\":\"Lily had a red ball. Lily had a red ball. Lily had a\","
                 "\"max_tokens\":96,\"temperature\":1,\"top_k\":40,\"top_p\":0.9,\"seed\":%d}",
                 seed);
        struct http_resp a = http_post(&plain, "/v1/completions", body);
        struct http_resp b = http_post(&spec, "/v1/completions", body);
        cJSON *ja = http_json(&a), *jb = http_json(&b);
        const char *ta = jstr(cJSON_GetArrayItem(jget(ja, "choices"), 0), "text");
        const char *tb = jstr(cJSON_GetArrayItem(jget(jb, "choices"), 0), "text");
        assert_non_null(ta);
        assert_non_null(tb);
        if (strcmp(ta, tb))
            fail_msg("seed %d: the texts differ\nplain: %s\nspec:  %s", seed, ta, tb);
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        http_resp_free(&a);
        http_resp_free(&b);
    }
    assert_true(metric(&spec, "hearth_spec_accepted_tokens_total") > 0);
    /* /slots says what each slot drafted and kept */
    struct http_resp r = http_get(&spec, "/slots");
    cJSON *slots       = http_json(&r);
    for (int i = 0; i < cJSON_GetArraySize(slots); i++) { /* idle now: the fields are there */
        assert_true(jnum(cJSON_GetArrayItem(slots, i), "draft_n") >= 0);
        assert_true(jnum(cJSON_GetArrayItem(slots, i), "draft_n_accepted") >= 0);
    }
    cJSON_Delete(slots);
    http_resp_free(&r);
    srv_stop(&plain);
    srv_stop(&spec);
}

/* ------------------------------------------------------------- chi-square --- */

enum { N_SEEDS = 300, MAX_CAT = N_SEEDS };

struct tally {
    char *text[MAX_CAT];
    int count[MAX_CAT];
    int n;
};

static void tally_add(struct tally *t, const char *text)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->text[i], text)) {
            t->count[i]++;
            return;
        }
    assert_true(t->n < MAX_CAT);
    t->text[t->n]    = strdup(text);
    t->count[t->n++] = 1;
}

static int tally_of(const struct tally *t, const char *text)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->text[i], text))
            return t->count[i];
    return 0;
}

static void tally_free(struct tally *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->text[i]);
}

/*
 * The first 4 tokens sampled at temperature 1 for seeds 1..N_SEEDS, with
 * extra request fields (a random model's flat distribution over its whole
 * vocabulary is cut to a few tokens so the categories fill).
 */
static void sample_texts(const struct srv *s, struct tally *t, const char *extra)
{
    memset(t, 0, sizeof *t);
    for (int seed = 1; seed <= N_SEEDS; seed++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"prompt\":\"the cat and the dog and the cat and the\",\"max_tokens\":4,"
                 "\"temperature\":1,\"seed\":%d%s}",
                 seed, extra);
        struct http_resp r = http_post(s, "/v1/completions", body);
        cJSON *j           = http_json(&r);
        const char *text   = jstr(cJSON_GetArrayItem(jget(j, "choices"), 0), "text");
        assert_non_null(text);
        tally_add(t, text);
        cJSON_Delete(j);
        http_resp_free(&r);
    }
}

/*
 * Pearson's chi-square statistic of homogeneity between two samples of equal
 * size, texts seen fewer than 10 times in both together pooled into one
 * category; *df its degrees of freedom.
 */
static double chi_square(const struct tally *a, const struct tally *b, int *df)
{
    double stat = 0, pool_a = 0, pool_b = 0;
    int cats                    = 0;
    const struct tally *both[2] = {a, b};
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < both[w]->n; i++) {
            const char *text = both[w]->text[i];
            if (w == 1 && tally_of(a, text))
                continue; /* counted from a's side */
            double x = tally_of(a, text), y = tally_of(b, text);
            if (x + y < 10) {
                pool_a += x;
                pool_b += y;
                continue;
            }
            double e = (x + y) / 2;
            stat += (x - e) * (x - e) / e + (y - e) * (y - e) / e;
            cats++;
        }
    if (pool_a + pool_b > 0) {
        double e = (pool_a + pool_b) / 2;
        stat += (pool_a - e) * (pool_a - e) / e + (pool_b - e) * (pool_b - e) / e;
        cats++;
    }
    *df = cats - 1;
    return stat;
}

/* The chi-square quantile at 1 - 0.001 (Wilson and Hilferty's approximation). */
static double chi_critical(int df)
{
    const double z = 3.090; /* the normal quantile at 0.999 */
    double h       = 2.0 / (9.0 * df);
    return df * pow(1 - h + z * sqrt(h), 3);
}

/*
 * Temperature 1 over 300 seeds: the first four tokens of plain decoding and
 * of speculation agree by a chi-square test at significance 0.001; a server
 * that keeps every draft (the broken rule) is told apart by the same test.
 * model NULL: SRV_MODEL with the n-gram drafter; else model with the drafter
 * args name, whose /metrics label is label.
 */
static void sampled_distribution(const char *model, const char *const *args, const char *label,
                                 const char *extra)
{
    struct srv plain, spec, broken;
    if (!model)
        assert_non_null(model = tu_model(SRV_MODEL));
    srv_start_opt(&plain, model, plain_args, true);
    srv_start_opt(&spec, model, args, true);
    setenv("HEARTH_SPEC_TEST_BREAK", "1", 1);
    srv_start_opt(&broken, model, args, true);
    unsetenv("HEARTH_SPEC_TEST_BREAK");
    struct tally tp, ts, tb;
    sample_texts(&plain, &tp, extra);
    sample_texts(&spec, &ts, extra);
    sample_texts(&broken, &tb, extra);
    assert_true(metric_of(&spec, "hearth_spec_drafted_tokens_total", label) > 0);
    int df_s, df_b;
    double chi_s = chi_square(&tp, &ts, &df_s), chi_b = chi_square(&tp, &tb, &df_b);
    print_message("chi-square (%s): speculation %.2f (df %d, critical %.2f); broken rule %.2f (df "
                  "%d, critical %.2f)\n",
                  label, chi_s, df_s, chi_critical(df_s), chi_b, df_b, chi_critical(df_b));
    assert_true(df_s >= 1 && df_b >= 1);
    assert_true(chi_s < chi_critical(df_s));
    assert_true(chi_b > chi_critical(df_b));
    tally_free(&tp);
    tally_free(&ts);
    tally_free(&tb);
    srv_stop(&plain);
    srv_stop(&spec);
    srv_stop(&broken);
}

static void test_sampled_distribution(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    sampled_distribution(NULL, spec_args, "drafter=\"ngram\"", "");
}

/* The block drafters under the same test, each on its target. */
static void test_sampled_distribution_eagle3(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(target, "tiny-qwen3-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(draft, "tiny-eagle3-qwen3-bpe-q8_0.gguf");
    const char *const args[] = {"--parallel",    "2",   "--ctx-size", "512", "--spec", "eagle3",
                                "--model-draft", draft, NULL};
    sampled_distribution(target, args, "drafter=\"eagle3\"", ",\"top_k\":2");
}

static void test_sampled_distribution_dflash(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(target, "tiny-qwen35-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(draft, "tiny-dflash-qwen35-bpe-q8_0.gguf");
    const char *const args[] = {"--parallel",    "2",   "--ctx-size", "512", "--spec", "dflash",
                                "--model-draft", draft, NULL};
    sampled_distribution(target, args, "drafter=\"dflash\"", ",\"top_k\":2");
}

/*
 * The shared pool: a second request, whose own text has no earlier match,
 * drafts from what the first one generated, and its text is still plain
 * decoding's.
 */
static void test_ngram_pool(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv plain, spec;
    srv_start(&plain, plain_args);
    srv_start(&spec, spec_args);
    static const char *const bodies[] = {
        "{\"prompt\":\"Once upon a time\",\"max_tokens\":48,\"temperature\":0}",
        "{\"prompt\":\"The sun was hot. Once upon a time\",\"max_tokens\":48,\"temperature\":0}"};
    double timed_n = 0, timed_a = 0;
    for (int i = 0; i < 2; i++) {
        struct http_resp a = http_post(&plain, "/v1/completions", bodies[i]);
        struct http_resp b = http_post(&spec, "/v1/completions", bodies[i]);
        cJSON *ja = http_json(&a), *jb = http_json(&b);
        const char *ta = jstr(cJSON_GetArrayItem(jget(ja, "choices"), 0), "text");
        const char *tb = jstr(cJSON_GetArrayItem(jget(jb, "choices"), 0), "text");
        assert_non_null(ta);
        assert_non_null(tb);
        assert_string_equal(ta, tb);
        timed_n += jnum(jget(jb, "timings"), "draft_n");
        timed_a += jnum(jget(jb, "timings"), "draft_n_accepted");
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        http_resp_free(&a);
        http_resp_free(&b);
    }
    double n = metric_of(&spec, "hearth_spec_drafted_tokens_total", "drafter=\"ngram_pool\"");
    double a = metric_of(&spec, "hearth_spec_accepted_tokens_total", "drafter=\"ngram_pool\"");
    print_message("ngram_pool: %.0f of %.0f accepted\n", a, n);
    assert_true(n > 0 && a > 0);
    /* the responses' timings account for every draft /metrics counts, the last of a job too */
    assert_true(timed_n == metric(&spec, "hearth_spec_drafted_tokens_total"));
    assert_true(timed_a == metric(&spec, "hearth_spec_accepted_tokens_total"));
    srv_stop(&plain);
    srv_stop(&spec);
}

/* ------------------------------------------------------------ draft model --- */

/*
 * Self-speculation: the model drafts for itself, so every draft is what the
 * model then samples (100% accepted) and the text is plain decoding's.
 */
static void test_draft_self(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q8_0.gguf");
    const char *const self[] = {"--parallel",    "2",  "--ctx-size", "512",
                                "--model-draft", path, NULL};
    struct srv plain, spec;
    srv_start_opt(&plain, path, plain_args, true);
    srv_start_opt(&spec, path, self, true);
    assert_int_equal(compare(&plain, &spec, "48"), 0);
    double drafted  = metric_of(&spec, "hearth_spec_drafted_tokens_total", "drafter=\"draft\"");
    double accepted = metric_of(&spec, "hearth_spec_accepted_tokens_total", "drafter=\"draft\"");
    print_message("self-speculation: %.0f of %.0f drafts accepted\n", accepted, drafted);
    assert_true(drafted > 0);
    assert_true(accepted == drafted);
    assert_true(metric_of(&spec, "hearth_spec_drafted_tokens_total", "drafter=\"ngram\"") == 0);
    /* the response's timings (llama-server's extension) say the same of one request */
    struct http_resp r = http_post(&spec, "/v1/completions",
                                   "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,"
                                   "\"temperature\":0,\"ignore_eos\":true}");
    cJSON *j           = http_json(&r);
    const cJSON *t     = jget(j, "timings");
    print_message("timings: draft_n %.0f, draft_n_accepted %.0f, predicted_n %.0f\n",
                  jnum(t, "draft_n"), jnum(t, "draft_n_accepted"), jnum(t, "predicted_n"));
    assert_true(jnum(t, "draft_n") > 0);
    assert_true(jnum(t, "draft_n_accepted") == jnum(t, "draft_n"));
    assert_true(jnum(t, "predicted_n") == 24);
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&plain);
    srv_stop(&spec);
}

/*
 * A prompt longer than a batch: the draft model catches up on it over
 * several batches before its first proposal, and still drafts what the
 * model then samples (self-speculation again).
 */
static void test_draft_long_prompt(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q8_0.gguf");
    const char *const small[] = {"--parallel",    "2",  "--ctx-size", "512", "--batch-size", "16",
                                 "--model-draft", path, NULL};
    struct srv plain, spec;
    srv_start_opt(&plain, path, plain_args, true);
    srv_start_opt(&spec, path, small, true);
    char body[2048] = "{\"prompt\":\"";
    for (int i = 0; i < 12; i++)
        strcat(body, "The cat sat on the mat and looked at the dog. ");
    strcat(body, "\",\"max_tokens\":40,\"temperature\":0,\"ignore_eos\":true}");
    struct http_resp a = http_post(&plain, "/v1/completions", body);
    struct http_resp b = http_post(&spec, "/v1/completions", body);
    cJSON *ja = http_json(&a), *jb = http_json(&b);
    assert_true(jnum(jget(jb, "usage"), "prompt_tokens") > 16 * 4);
    assert_string_equal(jstr(cJSON_GetArrayItem(jget(ja, "choices"), 0), "text"),
                        jstr(cJSON_GetArrayItem(jget(jb, "choices"), 0), "text"));
    const cJSON *t = jget(jb, "timings");
    print_message("long prompt: %.0f prompt tokens, draft_n %.0f, draft_n_accepted %.0f\n",
                  jnum(jget(jb, "usage"), "prompt_tokens"), jnum(t, "draft_n"),
                  jnum(t, "draft_n_accepted"));
    assert_true(jnum(t, "draft_n") > 0);
    assert_true(jnum(t, "draft_n_accepted") == jnum(t, "draft_n"));
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    http_resp_free(&a);
    http_resp_free(&b);
    srv_stop(&plain);
    srv_stop(&spec);
}

/*
 * A chain: the n-gram proposal where there is one, a Q4_0 copy of the Q8_0
 * model otherwise; both drafters land some tokens and the text is unchanged.
 */
static void test_draft_chain(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(target, "tiny-llama-spm-q8_0.gguf");
    TU_MODEL_OR_SKIP(draft, "tiny-llama-spm-q4_0.gguf");
    const char *const chain[] = {"--parallel",    "2",      "--ctx-size",
                                 "512",           "--spec", "ngram,draft",
                                 "--model-draft", draft,    NULL};
    struct srv plain, spec;
    srv_start_opt(&plain, target, plain_args, true);
    srv_start_opt(&spec, target, chain, true);
    assert_int_equal(compare(&plain, &spec, "64"), 0);
    static const char *const who[] = {"drafter=\"ngram\"", "drafter=\"draft\""};
    for (int d = 0; d < 2; d++) {
        double n = metric_of(&spec, "hearth_spec_drafted_tokens_total", who[d]);
        double a = metric_of(&spec, "hearth_spec_accepted_tokens_total", who[d]);
        print_message("%s: %.0f of %.0f accepted\n", who[d], a, n);
        assert_true(n > 0 && a > 0 && a <= n);
    }
    srv_stop(&plain);
    srv_stop(&spec);
}

/* A draft model with another vocabulary is refused at load, naming the difference. */
static void test_draft_vocab_refused(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(target, "tiny-llama-spm-q8_0.gguf");
    TU_MODEL_OR_SKIP(other, "tiny-qwen2-bpe-q8_0.gguf"); /* a BPE vocabulary of 32256 */
    const char *const args[] = {"--model-draft", other, NULL};
    struct srv s;
    char *log = NULL;
    assert_false(srv_start_try(&s, target, args, &log));
    print_message("%s", log);
    assert_non_null(strstr(log, "a draft model must share the vocabulary"));
    free(log);
    const char *argv[] = {tu_bin(), "serve", "-m", target, "--spec", "draft", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
    assert_non_null(strstr(err, "--spec draft needs --model-draft"));
    free(out);
    free(err);
}

/*
 * A model with recurrent layers (qwen35moe): rejected drafts are rolled back
 * from the states kept in the verify batch (hearth_seq_keep_states). The
 * MTP file's main model drafts for the plain one; it agrees often enough
 * to keep some drafts and not all, so both the kept and the cut paths run,
 * and the text is plain decoding's.
 */
static void test_recurrent_rollback(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(target, "tiny-qwen35moe-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(draft, "tiny-qwen35moe-mtp-bpe-q8_0.gguf");
    const char *const args[] = {"--parallel",    "2",      "--ctx-size",
                                "512",           "--spec", "ngram,draft",
                                "--model-draft", draft,    NULL};
    struct srv plain, spec;
    srv_start_opt(&plain, target, plain_args, true);
    srv_start_opt(&spec, target, args, true);
    assert_int_equal(compare(&plain, &spec, "48"), 0);
    double n = metric(&spec, "hearth_spec_drafted_tokens_total");
    double a = metric(&spec, "hearth_spec_accepted_tokens_total");
    print_message("qwen35moe: %.0f of %.0f drafts kept\n", a, n);
    assert_true(a > 0 && a < n);
    srv_stop(&plain);
    srv_stop(&spec);
}

/*
 * The model's own MTP head (--spec mtp) on a shared file that has one: its
 * random head is mostly rejected, so nearly every step rolls the recurrent
 * state back, and the text is plain decoding's, alone and chained after the
 * n-gram drafter. A prompt sent twice reuses its prefix in the target: the
 * head, which did not see those positions, catches up on them.
 */
static void mtp_drafts(const char *file)
{
    TU_MODEL_OR_SKIP(path, file);
    const char *const mtp[]   = {"--parallel",        "2",  "--ctx-size", "512", "--spec", "mtp",
                                 "--ctx-checkpoints", "16", NULL};
    const char *const chain[] = {"--parallel", "2",         "--ctx-size", "512",
                                 "--spec",     "ngram,mtp", NULL};
    struct srv plain, spec, both;
    srv_start_opt(&plain, path, plain_args, true);
    srv_start_opt(&spec, path, mtp, true);
    srv_start_opt(&both, path, chain, true);
    assert_int_equal(compare(&plain, &spec, "48"), 0);
    assert_int_equal(compare(&plain, &both, "48"), 0);
    char body[2048] = "{\"prompt\":\"";
    for (int i = 0; i < 10; i++)
        strcat(body, "The cat sat on the mat and looked at the dog. ");
    strcat(body, "\",\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true}");
    struct http_resp r0 = http_post(&plain, "/v1/completions", body);
    cJSON *j0           = http_json(&r0);
    /* the second time the chain's n-gram pool knows the continuation */
    for (int round = 0; round < 4; round++) {
        struct http_resp r = http_post(round % 2 ? &both : &spec, "/v1/completions", body);
        cJSON *j           = http_json(&r);
        const cJSON *t     = jget(j, "timings");
        print_message("%s, round %d: cache_n %.0f, draft_n %.0f, kept %.0f\n",
                      round % 2 ? "ngram,mtp" : "mtp", round / 2, jnum(t, "cache_n"),
                      jnum(t, "draft_n"), jnum(t, "draft_n_accepted"));
        assert_string_equal(jstr(cJSON_GetArrayItem(jget(j0, "choices"), 0), "text"),
                            jstr(cJSON_GetArrayItem(jget(j, "choices"), 0), "text"));
        assert_true(jnum(t, "draft_n") > 0);
        if (round >= 2)
            assert_true(jnum(t, "cache_n") > 0);
        cJSON_Delete(j);
        http_resp_free(&r);
    }
    double n  = metric_of(&spec, "hearth_spec_drafted_tokens_total", "drafter=\"mtp\"");
    double a  = metric_of(&spec, "hearth_spec_accepted_tokens_total", "drafter=\"mtp\"");
    double gn = metric_of(&both, "hearth_spec_drafted_tokens_total", "drafter=\"ngram");
    double ga = metric_of(&both, "hearth_spec_accepted_tokens_total", "drafter=\"ngram");
    double bn = metric_of(&both, "hearth_spec_drafted_tokens_total", "drafter=\"mtp\"");
    print_message("mtp: %.0f of %.0f kept; chained: n-grams %.0f of %.0f, mtp %.0f drafted\n", a, n,
                  ga, gn, bn);
    assert_true(n > 100 && a < n);
    assert_true(gn > 0 && ga > 0 && bn > 0);
    assert_true(metric_of(&spec, "hearth_spec_drafted_tokens_total", "drafter=\"draft\"") == 0);
    cJSON_Delete(j0);
    http_resp_free(&r0);
    srv_stop(&plain);
    srv_stop(&spec);
    srv_stop(&both);
}

/* qwen35moe's head: a gated attention layer with routed experts */
static void test_mtp(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    mtp_drafts("tiny-qwen35moe-mtp-bpe-q8_0.gguf");
}

/* the dense qwen35's head: the same layer with a SwiGLU FFN */
static void test_mtp_qwen35(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    mtp_drafts("tiny-qwen35-mtp-bpe-q8_0.gguf");
}

/*
 * A block drafter (--spec eagle3 / dflash --model-draft FILE) on its target:
 * it proposes on every step (its random weights are mostly rejected, so the
 * cut path runs nearly every step), alone and chained after the n-gram
 * drafter, and greedy and seeded sampled texts are plain decoding's. A
 * prompt sent twice reuses its prefix in the target: the drafter, which did
 * not see those positions, catches up on them and drafts again.
 */
static void block_drafts(const char *target_file, const char *draft_file, const char *kind)
{
    TU_MODEL_OR_SKIP(target, target_file);
    TU_MODEL_OR_SKIP(draft, draft_file);
    char chain_kind[32], label[48];
    snprintf(chain_kind, sizeof chain_kind, "%s,ngram", kind);
    snprintf(label, sizeof label, "drafter=\"%s\"", kind);
    const char *const alone[] = {"--parallel",    "2",   "--ctx-size", "512", "--spec", kind,
                                 "--model-draft", draft, NULL};
    const char *const chain[] = {"--parallel",    "2",   "--ctx-size", "512", "--spec", chain_kind,
                                 "--model-draft", draft, NULL};
    struct srv plain, spec, both;
    srv_start_opt(&plain, target, plain_args, true);
    srv_start_opt(&spec, target, alone, true);
    srv_start_opt(&both, target, chain, true);
    assert_int_equal(compare(&plain, &spec, "48"), 0);
    assert_int_equal(compare(&plain, &both, "48"), 0);
    char body[2048] = "{\"prompt\":\"";
    for (int i = 0; i < 10; i++)
        strcat(body, "The cat sat on the mat and looked at the dog. ");
    strcat(body, "\",\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true}");
    struct http_resp r0 = http_post(&plain, "/v1/completions", body);
    cJSON *j0           = http_json(&r0);
    for (int round = 0; round < 4; round++) {
        struct http_resp r = http_post(round % 2 ? &both : &spec, "/v1/completions", body);
        cJSON *j           = http_json(&r);
        const cJSON *t     = jget(j, "timings");
        print_message("%s, round %d: cache_n %.0f, draft_n %.0f, kept %.0f\n",
                      round % 2 ? chain_kind : kind, round / 2, jnum(t, "cache_n"),
                      jnum(t, "draft_n"), jnum(t, "draft_n_accepted"));
        assert_string_equal(jstr(cJSON_GetArrayItem(jget(j0, "choices"), 0), "text"),
                            jstr(cJSON_GetArrayItem(jget(j, "choices"), 0), "text"));
        assert_true(jnum(t, "draft_n") > 0);
        if (round >= 2)
            assert_true(jnum(t, "cache_n") > 0);
        cJSON_Delete(j);
        http_resp_free(&r);
    }
    /* seeded sampling, each prompt new to every server (a reused prefix is computed in other
     * batches, whose last bits may differ) */
    for (int i = 0; i < 6; i++) {
        char sb[256];
        snprintf(sb, sizeof sb,
                 "{\"prompt\":\"Seed %d: the cat and the dog and the cat and\",\"max_tokens\":32,"
                 "\"temperature\":%s,\"seed\":%d,\"ignore_eos\":true}",
                 i, i % 2 ? "1.0" : "0.7", 100 + i);
        struct http_resp rp = http_post(&plain, "/v1/completions", sb);
        struct http_resp rs = http_post(i % 2 ? &both : &spec, "/v1/completions", sb);
        cJSON *jp = http_json(&rp), *js = http_json(&rs);
        assert_string_equal(jstr(cJSON_GetArrayItem(jget(jp, "choices"), 0), "text"),
                            jstr(cJSON_GetArrayItem(jget(js, "choices"), 0), "text"));
        cJSON_Delete(jp);
        cJSON_Delete(js);
        http_resp_free(&rp);
        http_resp_free(&rs);
    }
    double n  = metric_of(&spec, "hearth_spec_drafted_tokens_total", label);
    double a  = metric_of(&spec, "hearth_spec_accepted_tokens_total", label);
    double gn = metric_of(&both, "hearth_spec_drafted_tokens_total", "drafter=\"ngram");
    double ga = metric_of(&both, "hearth_spec_accepted_tokens_total", "drafter=\"ngram");
    double bn = metric_of(&both, "hearth_spec_drafted_tokens_total", label);
    print_message("%s: %.0f of %.0f kept; chained: n-grams %.0f of %.0f, %s %.0f drafted\n", kind,
                  a, n, ga, gn, kind, bn);
    assert_true(n > 100 && a <= n);
    assert_true(gn > 0 && ga > 0 && bn > 0);
    assert_true(metric_of(&spec, "hearth_spec_drafted_tokens_total", "drafter=\"draft\"") == 0);
    /* /slots counts the drafts of each slot too */
    struct http_resp sl = http_get(&spec, "/slots");
    assert_int_equal(sl.status, 200);
    print_message("/slots: %.300s\n", sl.body);
    http_resp_free(&sl);
    cJSON_Delete(j0);
    http_resp_free(&r0);
    srv_stop(&plain);
    srv_stop(&spec);
    srv_stop(&both);
}

/* EAGLE-3 on qwen3: one layer over [embedding, fc(inputs of layers 1, 2, 3)] */
static void test_eagle3(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    block_drafts("tiny-qwen3-bpe-q8_0.gguf", "tiny-eagle3-qwen3-bpe-q8_0.gguf", "eagle3");
}

/* DFlash on the hybrid qwen35: each rejected draft rolls the DeltaNet states back */
static void test_dflash(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    block_drafts("tiny-qwen35-bpe-q8_0.gguf", "tiny-dflash-qwen35-bpe-q8_0.gguf", "dflash");
}

/*
 * With the target's layers on Vulkan (-ngl 99) the block drafters still run
 * on the host, reading the captured layer inputs back from the device: the
 * greedy text is the same Vulkan server's without a drafter, and they draft.
 */
static void test_block_drafters_vulkan(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    char why[256];
    if (!backend_vulkan(0, why, sizeof why)) {
        print_message("skip: no Vulkan device: %s\n", why);
        skip();
    }
    static const char *const files[][3] = {
        {"tiny-qwen3-bpe-q8_0.gguf", "tiny-eagle3-qwen3-bpe-q8_0.gguf", "eagle3"},
        {"tiny-qwen35-bpe-q8_0.gguf", "tiny-dflash-qwen35-bpe-q8_0.gguf", "dflash"},
    };
    for (int f = 0; f < 2; f++) {
        TU_MODEL_OR_SKIP(target, files[f][0]);
        TU_MODEL_OR_SKIP(draft, files[f][1]);
        char label[48];
        snprintf(label, sizeof label, "drafter=\"%s\"", files[f][2]);
        const char *const plain[] = {"--parallel", "2", "--ctx-size", "512", "-ngl", "99", NULL};
        const char *const spec[] = {"--parallel", "2",         "--ctx-size",    "512", "-ngl", "99",
                                    "--spec",     files[f][2], "--model-draft", draft, NULL};
        struct srv p, s;
        srv_start_opt(&p, target, plain, true);
        srv_start_opt(&s, target, spec, true);
        assert_int_equal(compare(&p, &s, "24"), 0);
        double n = metric_of(&s, "hearth_spec_drafted_tokens_total", label);
        print_message("%s on Vulkan: %.0f drafted\n", files[f][2], n);
        assert_true(n > 0);
        srv_stop(&p);
        srv_stop(&s);
    }
}

/* A bad --spec is a usage error; --spec mtp on a model without a head is refused at load. */
static void test_refusals(void **state)
{
    const char *argv[] = {tu_bin(), "serve", "-m", "x.gguf", "--spec", "eagle", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
    assert_non_null(strstr(err, "--spec takes ngram, draft, mtp, ngram,draft, ngram,mtp, eagle3, "
                                "eagle3,ngram, dflash, dflash,ngram or none"));
    free(out);
    free(err);
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(path, "tiny-qwen35moe-bpe-q8_0.gguf");
    const char *const args[] = {"--spec", "mtp", NULL};
    struct srv s;
    char *log = NULL;
    assert_false(srv_start_try(&s, path, args, &log));
    print_message("%s", log);
    assert_non_null(strstr(log, "the model has no multi-token-prediction head"));
    free(log);
    /* the head runs with the output, which must then stay on the CPU */
    TU_MODEL_OR_SKIP(mtp_path, "tiny-qwen35moe-mtp-bpe-q8_0.gguf");
    char why[256];
    if (!backend_vulkan(0, why, sizeof why)) {
        print_message("skip: no Vulkan device for the -ngl case: %s\n", why);
        return;
    }
    const char *const gpu[] = {"--spec", "mtp", "-ngl", "99", NULL};
    assert_false(srv_start_try(&s, mtp_path, gpu, &log));
    print_message("%s", log);
    assert_non_null(strstr(log, "the MTP head runs where the output does"));
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_greedy_identical_stories, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_greedy_identical_quantized, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_greedy_identical_every_architecture, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sampled_same_per_seed, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sampled_distribution, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sampled_distribution_eagle3, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sampled_distribution_dflash, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_ngram_pool, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_draft_self, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_draft_long_prompt, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_draft_chain, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_draft_vocab_refused, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_recurrent_rollback, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_mtp, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_mtp_qwen35, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_eagle3, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_dflash, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_block_drafters_vulkan, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_refusals, srv_kill_leftovers),
    };
    const char *only = getenv("HEARTH_SPEC_ONLY"); /* e.g. test_eagle3: one test alone */
    if (only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
