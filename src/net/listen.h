/*
 * listen.h: an evhttp server's sockets, for `hearth serve` and `hearth
 * route` alike: binding it to its address, and what each treats a client's
 * connection with while a reply is under way.
 */
#ifndef HEARTH_NET_LISTEN_H
#define HEARTH_NET_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/util.h>

struct evhttp;
struct evhttp_bound_socket;
struct evhttp_connection;

/*
 * Binds http to host:port (0: any free port) and prints "hearth WHO:
 * listening on http://HOST:PORT" plus note (may be "") on stderr with the
 * port it got. The bound socket, or NULL with one sentence in err.
 */
struct evhttp_bound_socket *http_listen(struct evhttp *http, const char *who, const char *host,
                                        int port, const char *note, char *err, size_t err_len);

/*
 * Sends what is written to evcon's socket at once (TCP_NODELAY): a reply's
 * head and then each event of a stream are small writes, and with Nagle's
 * algorithm the kernel holds each back until the peer acknowledges the one
 * before, which a keep-alive peer does late (40 ms on a stream's first
 * token). No effect before the socket exists.
 */
void http_no_delay(struct evhttp_connection *evcon);

/*
 * Whether a watch on a client's socket (EV_CLOSED where the loop has it,
 * else EV_READ) that fired with what means the client hung up: data that
 * is waiting (a pipelined request) is not a hang-up.
 */
bool http_peer_hung_up(evutil_socket_t fd, short what);

#endif
