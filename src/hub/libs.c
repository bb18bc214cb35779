/* libs.c: libcurl and libcrypto by dlopen (libs.h), and SHA-256 over the latter. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "hub/libs.h"
#include "util/errfmt.h"

static struct hub_libs libs;
static int opened; /* 1 once every function is found */

struct sym {
    const char *name;
    size_t at; /* the slot's offset in struct hub_libs */
};

/* clang-format off */
#define S(name, slot)                                                                              \
    {                                                                                              \
        name, offsetof(struct hub_libs, slot)                                                      \
    }
/* clang-format on */
/* clang-format off */
static const struct sym curl_syms[] = {
    S("curl_global_init", global_init),
    S("curl_global_cleanup", global_cleanup),
    S("curl_easy_init", easy_init),
    S("curl_easy_cleanup", easy_cleanup),
    S("curl_easy_reset", easy_reset),
    S("curl_easy_setopt", easy_setopt),
    S("curl_easy_perform", easy_perform),
    S("curl_easy_getinfo", easy_getinfo),
    S("curl_easy_strerror", easy_strerror),
    S("curl_easy_escape", easy_escape),
    S("curl_free", free),
    S("curl_slist_append", slist_append),
    S("curl_slist_free_all", slist_free_all),
};
/* clang-format on */
/* clang-format off */
static const struct sym crypto_syms[] = {
    S("EVP_MD_CTX_new", md_ctx_new),          S("EVP_MD_CTX_free", md_ctx_free),
    S("EVP_DigestInit_ex", digest_init_ex),   S("EVP_DigestUpdate", digest_update),
    S("EVP_DigestFinal_ex", digest_final_ex), S("EVP_sha256", sha256),
};
/* clang-format on */
#undef S

/* Fills the slots syms name from lib into t. */
static int resolve(struct hub_libs *t, const char *lib, const char *package, const struct sym *syms,
                   size_t n, char *err, size_t err_len)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        set_err(err, err_len, "hearth pull needs %s (Debian: %s): %s", lib, package, dlerror());
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        void *fn = dlsym(h, syms[i].name);
        if (!fn) {
            set_err(err, err_len, "%s has no %s: it is too old for hearth pull", lib, syms[i].name);
            return -1;
        }
        /* POSIX's dlsym gives a function as an object pointer: its bytes are the function's */
        memcpy((char *)t + syms[i].at, &fn, sizeof fn);
    }
    return 0;
}

const struct hub_libs *hub_libs(char *err, size_t err_len)
{
    if (opened)
        return &libs;
    if (resolve(&libs, "libcurl.so.4", "libcurl4", curl_syms,
                sizeof curl_syms / sizeof curl_syms[0], err, err_len) ||
        resolve(&libs, "libcrypto.so.3", "libssl3", crypto_syms,
                sizeof crypto_syms / sizeof crypto_syms[0], err, err_len))
        return NULL;
    opened = 1;
    return &libs;
}

int sha256_init(struct sha256 *s, const struct hub_libs *l)
{
    s->l = l;
    if (!s->ctx && !(s->ctx = l->md_ctx_new()))
        return 0;
    return l->digest_init_ex(s->ctx, l->sha256(), NULL) == 1;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
    s->l->digest_update(s->ctx, data, len);
}

void sha256_hex(struct sha256 *s, char hex[65])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    s->l->digest_final_ex(s->ctx, d, &n);
    static const char digits[] = "0123456789abcdef";
    for (unsigned int i = 0; i < 32; i++) {
        hex[2 * i]     = digits[i < n ? d[i] >> 4 : 0];
        hex[2 * i + 1] = digits[i < n ? d[i] & 15 : 0];
    }
    hex[64] = 0;
}

void sha256_free(struct sha256 *s)
{
    if (s->ctx)
        s->l->md_ctx_free(s->ctx);
    s->ctx = NULL;
}
