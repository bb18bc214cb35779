/*
 * listing.c: the Hub's file list of a repository, and which of its files a
 * spec names: llama.cpp's -hf rules, with a quant matched only as a whole
 * name part (Q4_0 is not IQ4_0's tail) and a split model whole or not at all.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hub/hub_int.h"
#include "util/errfmt.h"

static bool name_char(int c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.';
}

/* An ORG or REPO name as the Hub allows them: [A-Za-z0-9._-], not led by '.' or '-'. */
static bool hub_name_ok(const char *s, size_t n)
{
    if (!n || n > 96 || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char((unsigned char)s[i]))
            return false;
    return true;
}

static bool ends_with_ci(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcasecmp(s + n - m, suffix);
}

enum hearth_status hub_spec_parse(const char *s, struct hub_spec *sp, char *err, size_t err_len)
{
    memset(sp, 0, sizeof *sp);
    const char *slash = strchr(s, '/');
    if (!slash)
        return fail(HEARTH_EINVAL, err, err_len,
                    "'%s' names no repository: give ORG/REPO, ORG/REPO:QUANT or ORG/REPO/FILE.gguf",
                    s);
    const char *repo = slash + 1;
    size_t repo_len  = strcspn(repo, ":/");
    if (!hub_name_ok(s, (size_t)(slash - s)) || !hub_name_ok(repo, repo_len))
        return fail(HEARTH_EINVAL, err, err_len,
                    "'%s' is not a Hugging Face repository name (ORG/REPO of letters, digits, '.', "
                    "'_' and '-')",
                    s);
    snprintf(sp->repo, sizeof sp->repo, "%.*s", (int)(repo + repo_len - s), s);
    const char *rest = repo + repo_len;
    if (*rest == ':') {
        const char *tag = rest + 1;
        const size_t n  = strlen(tag);
        if (!n || n >= sizeof sp->tag)
            return fail(HEARTH_EINVAL, err, err_len,
                        "'%s': the quant after ':' is empty or too long", s);
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)tag[i]) && tag[i] != '_' && tag[i] != '-')
                return fail(HEARTH_EINVAL, err, err_len,
                            "'%s': a quant is letters, digits, '_' and '-' (Q4_K_M, q8_0)", s);
        memcpy(sp->tag, tag, n + 1);
    } else if (*rest == '/') {
        const char *file = rest + 1;
        if (strlen(file) >= sizeof sp->file || !hub_path_safe(file) || !ends_with_ci(file, ".gguf"))
            return fail(HEARTH_EINVAL, err, err_len,
                        "'%s': the file after ORG/REPO/ must be a relative path to a .gguf file",
                        s);
        strcpy(sp->file, file);
    }
    return HEARTH_OK;
}

/* Whether the n bytes at c end as hearth's own partial (.part-<16 hex>) or temporary
 * (.tmp-<pid>) names do (hub.c), which a listed file must not take. */
static bool ours(const char *c, size_t n)
{
    size_t d = 0;
    while (d < n && isxdigit((unsigned char)c[n - 1 - d]))
        d++;
    if (d == 16 && n >= 22 && !memcmp(c + n - 22, ".part-", 6))
        return true;
    size_t k = 0;
    while (k < n && isdigit((unsigned char)c[n - 1 - k]))
        k++;
    return k && n >= k + 5 && !memcmp(c + n - k - 5, ".tmp-", 5);
}

bool hub_path_safe(const char *path)
{
    if (!*path || strlen(path) > 1000)
        return false;
    for (const char *p = path; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\' || *p == ':')
            return false;
    for (const char *c = path;;) {
        const size_t n = strcspn(c, "/");
        /* dot-led names keep the cache's own files (.hearth-files.json) out of reach */
        if (!n || c[0] == '.' || ours(c, n))
            return false;
        if (!c[n])
            return true;
        c += n + 1;
    }
}

static enum hearth_status add_file(struct hub_listing *l, const char *path, uint64_t size,
                                   const char *sha, char *err, size_t err_len)
{
    if (l->n == l->cap) {
        const int cap         = l->cap ? 2 * l->cap : 16;
        struct hub_file *grow = realloc(l->files, (size_t)cap * sizeof *grow);
        if (!grow)
            return fail(HEARTH_ENOMEM, err, err_len, "out of memory reading the file list");
        l->files = grow, l->cap = cap;
    }
    struct hub_file *f = &l->files[l->n];
    if (!(f->path = strdup(path)))
        return fail(HEARTH_ENOMEM, err, err_len, "out of memory reading the file list");
    f->size = size;
    snprintf(f->sha256, sizeof f->sha256, "%s", sha);
    l->n++;
    return HEARTH_OK;
}

static bool is_sha256(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s) && !(*s >= 'a' && *s <= 'f'))
            return false;
    return true;
}

/* A byte count: a JSON integer in [0, 2^53]. */
static bool size_of(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

enum hearth_status hub_listing_parse(struct hub_listing *l, const char *json, size_t len, char *err,
                                     size_t err_len)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return fail(HEARTH_EFORMAT, err, err_len, "the Hub's file list is not a JSON array");
    }
    enum hearth_status st = HEARTH_OK;
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
        const cJSON *path = cJSON_GetObjectItemCaseSensitive(it, "path");
        if (!cJSON_IsString(type) || !cJSON_IsString(path)) {
            st = fail(HEARTH_EFORMAT, err, err_len,
                      "the Hub's file list has an entry without a "
                      "type or path");
            break;
        }
        if (strcmp(type->valuestring, "file"))
            continue; /* a folder: its files are listed too (recursive=true) */
        if (!hub_path_safe(path->valuestring)) {
            st = fail(HEARTH_EFORMAT, err, err_len,
                      "the Hub's file list names a path hearth will not write: '%.200s'",
                      path->valuestring);
            break;
        }
        uint64_t size;
        const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(it, "lfs");
        const char *sha  = "";
        if (lfs) {
            const cJSON *oid = cJSON_GetObjectItemCaseSensitive(lfs, "oid");
            if (!cJSON_IsString(oid) || !is_sha256(oid->valuestring) ||
                !size_of(cJSON_GetObjectItemCaseSensitive(lfs, "size"), &size)) {
                st = fail(HEARTH_EFORMAT, err, err_len,
                          "the Hub's file list gives '%.200s' no SHA-256 and size",
                          path->valuestring);
                break;
            }
            sha = oid->valuestring;
        } else if (!size_of(cJSON_GetObjectItemCaseSensitive(it, "size"), &size)) {
            st = fail(HEARTH_EFORMAT, err, err_len, "the Hub's file list gives '%.200s' no size",
                      path->valuestring);
            break;
        }
        if ((st = add_file(l, path->valuestring, size, sha, err, err_len)))
            break;
    }
    cJSON_Delete(root);
    return st;
}

char *hub_listing_json(const struct hub_listing *l)
{
    cJSON *root = cJSON_CreateArray();
    bool ok     = root != NULL;
    for (int i = 0; ok && i < l->n; i++) {
        const struct hub_file *f = &l->files[i];
        cJSON *e                 = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(root, e) && cJSON_AddStringToObject(e, "type", "file") &&
             cJSON_AddStringToObject(e, "path", f->path) &&
             cJSON_AddNumberToObject(e, "size", (double)f->size);
        if (ok && f->sha256[0]) {
            cJSON *lfs = cJSON_AddObjectToObject(e, "lfs");
            ok         = lfs && cJSON_AddStringToObject(lfs, "oid", f->sha256) &&
                 cJSON_AddNumberToObject(lfs, "size", (double)f->size);
        }
    }
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return s;
}

void hub_listing_free(struct hub_listing *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->files[i].path);
    free(l->files);
    memset(l, 0, sizeof *l);
}

/* The length of path's name before "-NNNNN-of-MMMMM.gguf" (or ".gguf"), and the part. */
static size_t split_prefix(const char *path, int *index, int *count)
{
    const size_t n = strlen(path);
    *index = *count   = 1;
    const size_t stem = ends_with_ci(path, ".gguf") ? n - 5 : n;
    /* -00001-of-00003: 15 characters */
    if (stem < 16)
        return stem;
    const char *t = path + stem - 15;
    if (t[0] != '-' || strncmp(t + 6, "-of-", 4))
        return stem;
    int idx = 0, cnt = 0;
    for (int i = 0; i < 5; i++) {
        if (!isdigit((unsigned char)t[1 + i]) || !isdigit((unsigned char)t[10 + i]))
            return stem;
        idx = idx * 10 + t[1 + i] - '0';
        cnt = cnt * 10 + t[10 + i] - '0';
    }
    if (idx < 1 || cnt < 1 || idx > cnt)
        return stem;
    *index = idx, *count = cnt;
    return stem - 15;
}

void hub_split_of(const char *path, int *index, int *count)
{
    split_prefix(path, index, count);
}

/* A model's weights, not a projector, an importance matrix or a drafter head sold beside it. */
static bool is_model(const char *path)
{
    if (!ends_with_ci(path, ".gguf"))
        return false;
    const char *base                     = strrchr(path, '/');
    base                                 = base ? base + 1 : path;
    static const char *const not_model[] = {"mmproj", "imatrix", "mtp-", "eagle3-"};
    for (size_t i = 0; i < sizeof not_model / sizeof not_model[0]; i++)
        if (strcasestr(base, not_model[i]))
            return false;
    return true;
}

/* Whether tag is a whole part of path's name: after its start, '-', '.', '_' or '/', and
 * before '.' or '-' (llama.cpp's "TAG[.-]", held to a left edge). */
static bool has_tag(const char *path, const char *tag)
{
    const size_t m = strlen(tag);
    for (const char *p = path; (p = strcasestr(p, tag)); p++) {
        const bool left = p == path || strchr("-._/", p[-1]);
        if (left && (p[m] == '.' || p[m] == '-'))
            return true;
    }
    return false;
}

/* path's quant: its stem's last '-' or '.' separated part (Q4_K_M), upper-cased, into q. */
static void quant_of(const char *path, char *q, size_t qn)
{
    int index, count;
    const size_t stem = split_prefix(path, &index, &count);
    size_t b          = stem;
    while (b > 0 && path[b - 1] != '-' && path[b - 1] != '.' && path[b - 1] != '/')
        b--;
    size_t j = 0;
    for (size_t i = b; i < stem && j + 1 < qn; i++)
        q[j++] = (char)toupper((unsigned char)path[i]);
    q[j] = 0;
}

/* All the parts of the split model path is part of, in order, into idx. */
static enum hearth_status parts_of(const struct hub_listing *l, int first, int *idx, int max,
                                   int *n, char *err, size_t err_len)
{
    int index, count;
    const char *path  = l->files[first].path;
    const size_t stem = split_prefix(path, &index, &count);
    if (count > max)
        return fail(HEARTH_EINVAL, err, err_len,
                    "'%s' is split in %d parts; hearth takes %d at most", path, count, max);
    for (int k = 1; k <= count; k++) {
        idx[k - 1] = -1;
        for (int i = 0; i < l->n; i++) {
            int ki, kc;
            const char *p = l->files[i].path;
            if (split_prefix(p, &ki, &kc) == stem && !strncmp(p, path, stem) && ki == k &&
                kc == count) {
                idx[k - 1] = i;
                break;
            }
        }
        if (idx[k - 1] < 0)
            return fail(HEARTH_EINVAL, err, err_len,
                        "'%s' is part of a model split in %d, but the repository lacks part %d",
                        path, count, k);
    }
    *n = count;
    return HEARTH_OK;
}

/* The first model file (a split model's part 1) carrying tag, or -1. */
static int find_tag(const struct hub_listing *l, const char *tag)
{
    for (int i = 0; i < l->n; i++) {
        int index, count;
        hub_split_of(l->files[i].path, &index, &count);
        if (index == 1 && is_model(l->files[i].path) && (!tag || has_tag(l->files[i].path, tag)))
            return i;
    }
    return -1;
}

enum hearth_status hub_select(const struct hub_listing *l, const struct hub_spec *sp, int *idx,
                              int max, int *n, char *err, size_t err_len)
{
    int first = -1;
    if (sp->file[0]) {
        for (int i = 0; i < l->n && first < 0; i++)
            if (!strcmp(l->files[i].path, sp->file))
                first = i;
        if (first < 0)
            return fail(HEARTH_EINVAL, err, err_len, "%s has no file '%s'", sp->repo, sp->file);
    } else if (sp->tag[0]) {
        first = find_tag(l, sp->tag);
    } else if ((first = find_tag(l, "Q4_K_M")) < 0 && (first = find_tag(l, "Q8_0")) < 0) {
        first = find_tag(l, NULL);
    }
    if (first < 0) {
        /* name the quants there are, so the next try is one edit away */
        char have[512] = "";
        size_t used    = 0;
        for (int i = 0; i < l->n; i++) {
            int index, count;
            hub_split_of(l->files[i].path, &index, &count);
            char q[64], dup[70];
            quant_of(l->files[i].path, q, sizeof q);
            snprintf(dup, sizeof dup, " %s,", q);
            char listed[520];
            snprintf(listed, sizeof listed, " %s,", have);
            if (index != 1 || !is_model(l->files[i].path) || !q[0] || strstr(listed, dup) ||
                used + strlen(q) + 3 >= sizeof have)
                continue;
            used += (size_t)snprintf(have + used, sizeof have - used, "%s%s", used ? ", " : "", q);
        }
        if (sp->tag[0])
            return fail(HEARTH_EINVAL, err, err_len, "%s has no GGUF file for quant %s%s%s",
                        sp->repo, sp->tag, have[0] ? "; it has " : " (it has no GGUF file)", have);
        return fail(HEARTH_EINVAL, err, err_len, "%s has no GGUF model file", sp->repo);
    }
    return parts_of(l, first, idx, max, n, err, err_len);
}
