/*
 * cmd_tokenize.c: `hearth tokenize`, the ids a model's vocabulary gives a
 * text. Reads only the GGUF metadata (the weights stay unmapped pages), so it
 * is instant even on a large model: the tool for comparing hearth's
 * tokenizer with llama.cpp's llama-tokenize.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "gguf/gguf.h"
#include "opts.h"
#include "text/tokenizer.h"

struct tokenize_args {
    struct model_args model;
    struct {
        const char *prompt, *file;
        bool ids, add_special, parse_special;
    } text;
};

#define TEXT(f) offsetof(struct tokenize_args, text.f) - offsetof(struct tokenize_args, text)
/* clang-format off */
static const struct opt text_list[] = {
    {.names = "-p --prompt", .value = "TEXT", .kind = OPT_STR, .off = TEXT(prompt),
     .help = "the text to tokenize"},
    {.names = "-f --file", .value = "FILE", .kind = OPT_STR, .off = TEXT(file),
     .help = "tokenize this file's contents instead"},
    {.names = "--ids", .kind = OPT_FLAG, .off = TEXT(ids),
     .help = "print only the ids, space-separated on one line; without it, one line per token: "
             "id -> 'piece'"},
    {.names = "--add-special", .kind = OPT_FLAG, .off = TEXT(add_special),
     .help = "add BOS/EOS as the vocabulary asks (off unless given)"},
    {.names = "--parse-special", .kind = OPT_FLAG, .off = TEXT(parse_special),
     .help = "text like <s> or <|im_end|> becomes that special token"},
};
/* clang-format on */
#undef TEXT

static const struct opt_group text_group = OPT_GROUP("Text", text_list);

/* clang-format off */
static const struct opt_use tokenize_uses[] = {
    {&opts_model, offsetof(struct tokenize_args, model)},
    {&text_group, offsetof(struct tokenize_args, text)},
};
/* clang-format on */

static const struct tokenize_args tokenize_defaults = {0};

const struct cmd_spec cmd_tokenize_spec = {
    .name      = "tokenize",
    .synopsis  = "hearth tokenize -m MODEL (-p TEXT | -f FILE) [--ids] [--add-special] "
                 "[--parse-special]\n"
                 "hearth tokenize -hf ORG/REPO[:QUANT] (-p TEXT | -f FILE) [options]",
    .about     = "Prints the token ids a model's vocabulary gives a text, as llama.cpp's "
                 "llama-tokenize does: one line per token, id -> 'piece', or the ids alone with "
                 "--ids. Reads only the GGUF metadata (the weights are not loaded), so it is "
                 "instant even on a large model.",
    .uses      = tokenize_uses,
    .n_uses    = sizeof tokenize_uses / sizeof tokenize_uses[0],
    .defaults  = &tokenize_defaults,
    .args_size = sizeof(struct tokenize_args),
};

/* The whole of path, malloc'd, in *out (length *len); false with a message on stderr. */
static bool read_all(const char *path, char **out, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "hearth: cannot open %s\n", path);
        return false;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fprintf(stderr, "hearth: out of memory reading %s\n", path);
            fclose(fp);
            return false;
        }
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap)
            break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger)
            free(buf);
        buf = bigger;
        cap *= 2;
    }
    bool ok = !ferror(fp);
    fclose(fp);
    if (!ok) {
        fprintf(stderr, "hearth: cannot read %s\n", path);
        free(buf);
        return false;
    }
    *out = buf;
    *len = n;
    return true;
}

/* One token as llama-tokenize shows it: special tokens by their text, others decoded. */
static void print_piece(const struct tokenizer *t, int32_t id)
{
    enum token_type type = tokenizer_token_type(t, id);
    if (type == TOKEN_CONTROL || type == TOKEN_UNKNOWN) {
        fputs(tokenizer_token_text(t, id), stdout);
        return;
    }
    char small[64];
    size_t n = tokenizer_decode_token(t, id, small, sizeof small);
    if (n <= sizeof small) {
        fwrite(small, 1, n, stdout);
        return;
    }
    char *big = malloc(n);
    if (big) {
        tokenizer_decode_token(t, id, big, n);
        fwrite(big, 1, n, stdout);
        free(big);
    }
}

int cmd_tokenize(int argc, char **argv)
{
    struct tokenize_args a;
    const enum opts_status st = opts_parse(&cmd_tokenize_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    const char *prompt = a.text.prompt, *file = a.text.file;
    const bool ids_only = a.text.ids, add_special = a.text.add_special,
               parse_special = a.text.parse_special;
    if ((!a.model.path && !a.model.hf) || !prompt == !file) {
        fprintf(stderr, "hearth tokenize: needs -m MODEL (or -hf ORG/REPO[:QUANT]) and one of "
                        "-p TEXT or -f FILE\n");
        return EXIT_USAGE;
    }
    char model[4096];
    const int mrc = model_args_path("tokenize", &a.model, model, sizeof model);
    if (mrc != EXIT_OK)
        return mrc;

    char *text = NULL;
    size_t len;
    if (file) {
        if (!read_all(file, &text, &len))
            return EXIT_RUNTIME;
    } else {
        len = strlen(prompt);
    }

    int rc                   = EXIT_RUNTIME;
    char err[HEARTH_ERR_MAX] = "";
    struct gguf_file *f      = NULL;
    struct tokenizer *t      = NULL;
    int32_t *ids             = NULL;
    size_t n_ids             = 0;
    if (gguf_open(model, &f, err, sizeof err) != HEARTH_OK ||
        tokenizer_load(f, &t, err, sizeof err) != HEARTH_OK ||
        tokenizer_encode(t, text ? text : prompt, len, add_special, parse_special, &ids, &n_ids,
                         err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }

    if (ids_only) {
        for (size_t i = 0; i < n_ids; i++)
            printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    } else {
        for (size_t i = 0; i < n_ids; i++) {
            printf("%6d -> '", ids[i]);
            print_piece(t, ids[i]);
            fputs("'\n", stdout);
        }
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "hearth: cannot write the output\n");
        goto out;
    }
    rc = EXIT_OK;
out:
    free(ids);
    tokenizer_free(t);
    gguf_close(f);
    free(text);
    return rc;
}
