/*
 * sha256.h: SHA-256 (FIPS 180-4), streamed. hearth pull checks each
 * download against the object id the Hugging Face Hub publishes for it.
 */
#ifndef HEARTH_SHA256_H
#define HEARTH_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint64_t len; /* bytes hashed so far */
    uint8_t buf[64];
    size_t n; /* bytes in buf */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL; s is spent. */
void sha256_hex(struct sha256 *s, char hex[65]);

#endif
