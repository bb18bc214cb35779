/*
 * url.h: an upstream server's address, from the URL a user gives on the
 * command line: where `hearth bench` sends its load and where `hearth
 * route` forwards requests. Plain HTTP only (no TLS, no user names, no
 * queries); the path is a prefix the API's own paths ("/v1/...") follow.
 * Pure: no I/O, no name lookups, no shared state.
 */
#ifndef HEARTH_NET_URL_H
#define HEARTH_NET_URL_H

#include <stdbool.h>
#include <stddef.h>

/* Where requests go: parsed from "http://HOST[:PORT][/PREFIX]". */
struct url_target {
    char host[256];     /* a name or an IPv4/IPv6 literal (brackets removed) */
    int port;           /* 1..65535; 80 when the URL has none */
    char prefix[256];   /* path prefix without a trailing '/', "" for none; a trailing "/v1" is
                           removed */
    char hostport[300]; /* the Host header's value */
};

/* Parses url; false with one sentence in err (e.g. "https is not supported"). */
bool url_target_parse(const char *url, struct url_target *t, char *err, size_t err_len);

#endif
