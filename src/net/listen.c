/*
 * listen.c: an evhttp server's sockets (listen.h).
 */
#include "net/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "util/errfmt.h"

struct evhttp_bound_socket *http_listen(struct evhttp *http, const char *who, const char *host,
                                        int port, const char *note, char *err, size_t err_len)
{
    struct evhttp_bound_socket *b = evhttp_bind_socket_with_handle(http, host, (ev_uint16_t)port);
    if (!b) {
        set_err(err, err_len, "%s: cannot listen on %s port %d: %s", who, host, port,
                strerror(errno));
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(b), (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    const bool v6 = strchr(host, ':') != NULL;
    fprintf(stderr, "hearth %s: listening on http://%s%s%s:%d%s\n", who, v6 ? "[" : "", host,
            v6 ? "]" : "", port, note);
    return b;
}

void http_no_delay(struct evhttp_connection *evcon)
{
    const evutil_socket_t fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
    const int one            = 1;
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool http_peer_hung_up(evutil_socket_t fd, short what)
{
    if (what & EV_CLOSED)
        return true;
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)));
}
