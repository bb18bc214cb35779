/* sha256.c: the sha256.h interface over OpenSSL's EVP digests. */
#include "util/sha256.h"

#include <openssl/evp.h>

bool sha256_init(struct sha256 *s)
{
    if (!s->ctx && !(s->ctx = EVP_MD_CTX_new()))
        return false;
    return EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) == 1;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
    EVP_DigestUpdate(s->ctx, data, len);
}

void sha256_hex(struct sha256 *s, char hex[65])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(s->ctx, d, &n);
    static const char digits[] = "0123456789abcdef";
    for (unsigned int i = 0; i < 32; i++) {
        hex[2 * i]     = digits[i < n ? d[i] >> 4 : 0];
        hex[2 * i + 1] = digits[i < n ? d[i] & 15 : 0];
    }
    hex[64] = 0;
}

void sha256_free(struct sha256 *s)
{
    EVP_MD_CTX_free(s->ctx);
    s->ctx = NULL;
}
