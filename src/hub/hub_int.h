/*
 * hub_int.h: the parts of hub.c that touch neither network nor disk: the
 * spec, the Hub's file list (untrusted: fuzz_hub_listing) and which of its
 * files a spec names.
 */
#ifndef HEARTH_HUB_INT_H
#define HEARTH_HUB_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct hub_spec {
    char repo[256];  /* ORG/REPO */
    char tag[64];    /* QUANT, or "" */
    char file[1024]; /* PATH inside the repository, or "" */
};

/* Parses ORG/REPO[:QUANT|/PATH]; HEARTH_EINVAL with the reason. */
enum hearth_status hub_spec_parse(const char *s, struct hub_spec *sp, char *err, size_t err_len);

struct hub_file {
    char *path;      /* inside the repository; hub_path_safe */
    uint64_t size;   /* bytes */
    char sha256[65]; /* the LFS object id; "" for a file the Hub keeps in git */
};

struct hub_listing {
    struct hub_file *files;
    int n, cap;
};

/*
 * Appends the files of one page of GET /api/models/ORG/REPO/tree/REV
 * (a JSON array of {type, path, size, lfs: {oid, size}}) to l, skipping
 * folders. HEARTH_EFORMAT for anything else, or a path that could leave
 * the repository's folder in the cache.
 */
enum hearth_status hub_listing_parse(struct hub_listing *l, const char *json, size_t len, char *err,
                                     size_t err_len);
/* l as the JSON array hub_listing_parse reads (the cache keeps it); malloc'd, or NULL. */
char *hub_listing_json(const struct hub_listing *l);
void hub_listing_free(struct hub_listing *l);

/* A relative path of plain components: no "", ".", ".." or dot-led names, no '\\' or controls. */
bool hub_path_safe(const char *path);

/* A split model's part: "NAME-00002-of-00005.gguf" is index 2, count 5; else 1 of 1. */
void hub_split_of(const char *path, int *index, int *count);

/*
 * The files sp names in l, as indices in part order (a split model's parts
 * 1..count), at most max; *n of them. HEARTH_EINVAL naming what is missing
 * (and, for a quant, the quants the repository has).
 */
enum hearth_status hub_select(const struct hub_listing *l, const struct hub_spec *sp, int *idx,
                              int max, int *n, char *err, size_t err_len);

#endif
