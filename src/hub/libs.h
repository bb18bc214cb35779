/*
 * libs.h: libcurl and libcrypto, opened (dlopen) the first time a pull
 * needs them, as the Vulkan loader is: a `hearth serve -m` never maps them,
 * so the resident set the memory law predicts stays the binary's own (the
 * two and what they pull in, GSSAPI, LDAP, ..., added 5 MiB to every
 * process when linked), and the binary still starts where libcurl4 is absent.
 */
#ifndef HEARTH_HUB_LIBS_H
#define HEARTH_HUB_LIBS_H

#include <stddef.h>

#include <curl/curl.h>
#include <openssl/evp.h>

struct hub_libs {
    /* libcurl.so.4 */
    CURLcode (*global_init)(long flags);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *c);
    void (*easy_reset)(CURL *c);
    CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *c);
    CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode rc);
    char *(*easy_escape)(CURL *c, const char *s, int len);
    void (*free)(void *p);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
    /* libcrypto.so.3 */
    EVP_MD_CTX *(*md_ctx_new)(void);
    void (*md_ctx_free)(EVP_MD_CTX *ctx);
    int (*digest_init_ex)(EVP_MD_CTX *ctx, const EVP_MD *md, ENGINE *e);
    int (*digest_update)(EVP_MD_CTX *ctx, const void *d, size_t n);
    int (*digest_final_ex)(EVP_MD_CTX *ctx, unsigned char *md, unsigned int *n);
    const EVP_MD *(*sha256)(void);
};

/* The libraries' functions, opened once and kept; NULL with the reason (which library, what
 * to install) in err when either cannot be opened. Not thread-safe: hearth pulls from one. */
const struct hub_libs *hub_libs(char *err, size_t err_len);

/* SHA-256, streamed, over libcrypto's EVP (its SHA-NI or ARMv8 code: 5 to 7 times a portable
 * C loop here, which a resume's re-hash of its partial file feels). */
struct sha256 {
    const struct hub_libs *l;
    EVP_MD_CTX *ctx; /* NULL until sha256_init */
};

/* Starts (or starts again) a hash; false when libcrypto cannot (out of memory). */
int sha256_init(struct sha256 *s, const struct hub_libs *l);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL; s may be started again. */
void sha256_hex(struct sha256 *s, char hex[65]);
/* Frees what sha256_init took; s = {0} may be freed. */
void sha256_free(struct sha256 *s);

#endif
