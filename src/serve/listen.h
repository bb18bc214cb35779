/*
 * listen.h: binding an evhttp server to its address, for `hearth serve` and
 * `hearth route` alike.
 */
#ifndef HEARTH_SERVE_LISTEN_H
#define HEARTH_SERVE_LISTEN_H

#include <stddef.h>

struct evhttp;
struct evhttp_bound_socket;

/*
 * Binds http to host:port (0: any free port) and prints "hearth WHO:
 * listening on http://HOST:PORT" plus note (may be "") on stderr with the
 * port it got. The bound socket, or NULL with one sentence in err.
 */
struct evhttp_bound_socket *http_listen(struct evhttp *http, const char *who, const char *host,
                                        int port, const char *note, char *err, size_t err_len);

#endif
