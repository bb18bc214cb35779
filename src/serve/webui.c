/*
 * webui.c: the chat page at / of `hearth serve`.
 *
 * src/serve/webui/index.html is one self-contained file (its CSS and
 * JavaScript inline, nothing fetched from elsewhere) that talks to the
 * server's own /v1 API. It is assembled into the binary byte for byte with
 * .incbin, so there is no generator and no build step; the Makefile makes
 * this object depend on the HTML, so an edit rebuilds it. About 30 KB.
 *
 * The page is public even under --api-key: it holds no secret, and every
 * API call it makes is checked as any client's is (on a 401 it asks the
 * reader for the key). --no-webui leaves / unrouted (http.c).
 */
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdint.h>

#include "serve/handlers.h"
#include "serve/server.h"

/* .incbin takes its path relative to the assembler's working directory: the Makefile runs every
 * compiler from the top of the tree. Hidden globals, so that the C below links to them in any
 * build (PIE, shared, sanitizers) without a GOT entry. */
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".globl serve_webui_html\n"
        ".hidden serve_webui_html\n"
        ".type serve_webui_html, %object\n"
        "serve_webui_html:\n"
        ".incbin \"src/serve/webui/index.html\"\n"
        "serve_webui_html_end:\n"
        ".size serve_webui_html, serve_webui_html_end - serve_webui_html\n"
        ".balign 4\n"
        ".globl serve_webui_html_len\n"
        ".hidden serve_webui_html_len\n"
        ".type serve_webui_html_len, %object\n"
        "serve_webui_html_len:\n"
        ".4byte serve_webui_html_end - serve_webui_html\n"
        ".size serve_webui_html_len, 4\n"
        ".popsection\n");

extern const char serve_webui_html[];       /* the page's bytes, not NUL-terminated */
extern const uint32_t serve_webui_html_len; /* their count */

/* Only what the page needs: inline script and style, fetches to this server, no framing. */
/* clang-format off */
#define WEBUI_CSP                                                                                  \
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "                  \
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "                     \
    "frame-ancestors 'none'"
/* clang-format on */

void h_webui(struct server *s, struct evhttp_request *req)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    /* revalidated on every load: the page changes with the binary, and it is small */
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(h, "Content-Security-Policy", WEBUI_CSP);
    serve_reply(s, req, EP_WEBUI, 200, "text/html; charset=utf-8", serve_webui_html,
                serve_webui_html_len);
}
