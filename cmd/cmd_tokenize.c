/*
 * cmd_tokenize.c: `hearth tokenize`, the ids a model's vocabulary gives a
 * text. Reads only the GGUF metadata (the weights stay unmapped pages), so it
 * is instant even on a large model: the tool for comparing hearth's
 * tokenizer with llama.cpp's llama-tokenize.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

static void usage(FILE *fp)
{
    fprintf(fp, "usage: hearth tokenize -m MODEL (-p TEXT | -f FILE) [--ids] [--add-special]\n"
                "                       [--parse-special]\n\n"
                "  -m, --model FILE   GGUF file whose vocabulary to use (weights are not loaded)\n"
                "  -p, --prompt TEXT  the text to tokenize\n"
                "  -f, --file FILE    tokenize this file's contents instead\n"
                "  --ids              print only the ids, space-separated on one line\n"
                "  --add-special      add BOS/EOS as the vocabulary asks (off by default)\n"
                "  --parse-special    text like <s> or <|im_end|> becomes that special token\n\n"
                "Without --ids, one line per token: id -> 'piece'.\n");
}

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
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool ids_only = false, add_special = false, parse_special = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = arg_value("tokenize", argc, argv, &i)))
                return EXIT_USAGE;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = arg_value("tokenize", argc, argv, &i)))
                return EXIT_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = arg_value("tokenize", argc, argv, &i)))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--ids")) {
            ids_only = true;
        } else if (!strcmp(a, "--add-special")) {
            add_special = true;
        } else if (!strcmp(a, "--parse-special")) {
            parse_special = true;
        } else {
            fprintf(stderr, "hearth tokenize: unknown option '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (!model || !prompt == !file) {
        fprintf(stderr, "hearth tokenize: needs -m MODEL and one of -p TEXT or -f FILE\n");
        usage(stderr);
        return EXIT_USAGE;
    }

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
