/*
 * url.c: "http://HOST[:PORT][/PREFIX]" -> a struct url_target (url.h). Every
 * refusal names the URL and what in it is wrong, since the user typed it.
 */
#include "net/url.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/errfmt.h"

bool url_target_parse(const char *url, struct url_target *t, char *err, size_t err_len)
{
    memset(t, 0, sizeof *t);
    if (!url || !*url)
        return fail(false, err, err_len, "the URL is empty");
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return fail(false, err, err_len, "the URL %s contains a space or control character",
                        url);
    const char *sep = strstr(url, "://");
    if (!sep)
        return fail(false, err, err_len, "the URL %s does not start with http://", url);
    size_t scheme_len = (size_t)(sep - url);
    if (scheme_len == 5 && strncasecmp(url, "https", 5) == 0)
        return fail(false, err, err_len, "https is not supported: hearth bench speaks plain HTTP");
    if (scheme_len != 4 || strncasecmp(url, "http", 4) != 0)
        return fail(false, err, err_len, "the URL scheme %.*s is not supported: use http://",
                    (int)(scheme_len > 32 ? 32 : scheme_len), url);

    const char *h = sep + 3, *host_end, *rest;
    bool v6       = false;
    if (*h == '[') {
        host_end = strchr(h, ']');
        if (!host_end)
            return fail(false, err, err_len, "the IPv6 address in %s has no closing ']'", url);
        h++;
        rest = host_end + 1;
        v6   = true;
        if (*rest && *rest != ':' && *rest != '/')
            return fail(false, err, err_len, "unexpected text after ']' in %s", url);
    } else {
        host_end = h + strcspn(h, ":/?#@");
        rest     = host_end;
    }
    if (*rest == '@' || memchr(h, '@', (size_t)(host_end - h)))
        return fail(false, err, err_len, "user names in URLs are not supported (%s)", url);
    size_t host_len = (size_t)(host_end - h);
    if (host_len == 0)
        return fail(false, err, err_len, "the URL %s has no host", url);
    if (host_len >= sizeof t->host)
        return fail(false, err, err_len, "the host of %s is longer than %zu bytes", url,
                    sizeof t->host - 1);
    memcpy(t->host, h, host_len);
    t->host[host_len] = 0;
    if (v6 && !strchr(t->host, ':'))
        return fail(false, err, err_len, "[%s] in %s is not an IPv6 address", t->host, url);

    t->port       = 80;
    bool has_port = false;
    if (*rest == ':') {
        rest++;
        long port  = 0;
        int digits = 0;
        while (isdigit((unsigned char)*rest) && digits < 6) {
            port = port * 10 + (*rest - '0');
            rest++;
            digits++;
        }
        if (digits == 0 || port < 1 || port > 65535 || (*rest && *rest != '/'))
            return fail(false, err, err_len, "the port of %s is not a number from 1 to 65535", url);
        t->port  = (int)port;
        has_port = true;
    }
    if (strpbrk(rest, "?#"))
        return fail(false, err, err_len, "queries and fragments are not supported in %s", url);
    if (*rest && *rest != '/')
        return fail(false, err, err_len, "unexpected '%c' after the host in %s", *rest, url);

    size_t plen = strlen(rest);
    while (plen > 0 && rest[plen - 1] == '/')
        plen--;
    if (plen >= 3 && memcmp(rest + plen - 3, "/v1", 3) == 0)
        plen -= 3;
    while (plen > 0 && rest[plen - 1] == '/')
        plen--;
    if (plen >= sizeof t->prefix)
        return fail(false, err, err_len, "the path of %s is longer than %zu bytes", url,
                    sizeof t->prefix - 1);
    memcpy(t->prefix, rest, plen);
    t->prefix[plen] = 0;

    /* The Host header names the port only when it is not the scheme's default. */
    snprintf(t->hostport, sizeof t->hostport, "%s%s%s", v6 ? "[" : "", t->host, v6 ? "]" : "");
    if (has_port && t->port != 80) {
        size_t n = strlen(t->hostport);
        snprintf(t->hostport + n, sizeof t->hostport - n, ":%d", t->port);
    }
    return true;
}
