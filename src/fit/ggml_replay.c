/*
 * ggml_replay.c: ggml's graph order and graph allocator over a described
 * graph (ggml_replay.h). The rules are ggml's as of the llama.cpp build
 * tests/unit/llamacpp_buffers.tsv was measured with; they are restated
 * here, not linked, since hearth does not depend on ggml.
 */
#include "fit/ggml_replay.h"

#include <stdlib.h>
#include <string.h>

#include "util/dtype.h"

#define ALIGN     32u /* the CPU buffer's tensor alignment */
#define MAX_HOLES 256

void gr_init(struct gr_graph *g)
{
    memset(g, 0, sizeof *g);
}

void gr_free(struct gr_graph *g)
{
    free(g->t);
    free(g->nodes);
    free(g->leafs);
    memset(g, 0, sizeof *g);
}

static void type_geometry(uint32_t type, size_t *size, int64_t *block)
{
    if (type == GR_I32 || type == GR_I64) {
        *size  = type == GR_I32 ? 4 : 8;
        *block = 1;
        return;
    }
    const struct dtype_info *d = dtype_get(type);
    *size                      = d ? d->block_len : 4;
    *block                     = d ? d->block : 1;
}

/* A contiguous tensor of shape ne, no sources; -1 when out of memory. */
static int new_tensor(struct gr_graph *g, uint32_t type, const int64_t ne_in[4])
{
    if (g->oom)
        return -1;
    int64_t ne[4]; /* ne_in may point into g->t, which growing moves */
    memcpy(ne, ne_in, sizeof ne);
    if (g->n == g->cap) {
        const int cap       = g->cap ? 2 * g->cap : 256;
        struct gr_tensor *t = realloc(g->t, (size_t)cap * sizeof *t);
        int *nodes          = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (nodes)
            g->nodes = nodes;
        int *leafs = realloc(g->leafs, (size_t)cap * sizeof *leafs);
        if (leafs)
            g->leafs = leafs;
        if (t)
            g->t = t;
        if (!t || !nodes || !leafs) {
            g->oom = true;
            return -1;
        }
        g->cap = cap;
    }
    struct gr_tensor *t = &g->t[g->n];
    memset(t, 0, sizeof *t);
    t->type = type;
    size_t size;
    int64_t block;
    type_geometry(type, &size, &block);
    memcpy(t->ne, ne, sizeof t->ne);
    t->nb[0] = size;
    t->nb[1] = size * (size_t)(t->ne[0] / block);
    for (int i = 2; i < 4; i++)
        t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
    for (int i = 0; i < GR_MAX_SRC; i++)
        t->src[i] = -1;
    t->view_src = -1;
    return g->n++;
}

int gr_leaf(struct gr_graph *g, uint32_t type, bool external, unsigned flags, int64_t ne0,
            int64_t ne1, int64_t ne2, int64_t ne3)
{
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const int id        = new_tensor(g, type, ne);
    if (id >= 0) {
        g->t[id].external = external;
        g->t[id].flags    = flags;
    }
    return id;
}

static void set_src(struct gr_graph *g, int id, const int *src)
{
    for (int i = 0; i < GR_MAX_SRC && src[i] != -1; i++)
        g->t[id].src[i] = src[i];
}

int gr_op(struct gr_graph *g, bool inplace, uint32_t type, const int64_t ne[4], const int *src)
{
    const int id = new_tensor(g, type, ne);
    if (id >= 0) {
        g->t[id].op      = true;
        g->t[id].inplace = inplace;
        set_src(g, id, src);
    }
    return id;
}

static int root(const struct gr_graph *g, int a)
{
    return g->t[a].view_src >= 0 ? g->t[a].view_src : a;
}

int gr_view(struct gr_graph *g, int a, const int64_t ne[4], const size_t nb_in[4], size_t offs)
{
    (void)offs; /* where in a the view starts does not move what the allocator does */
    if (a < 0)
        return -1;
    size_t nb[4];
    memcpy(nb, nb_in, sizeof nb);
    const int id = new_tensor(g, g->t[a].type, ne);
    if (id >= 0) {
        struct gr_tensor *t = &g->t[id];
        memcpy(t->nb, nb, sizeof t->nb);
        t->op       = true;
        t->view_src = root(g, a);
        t->src[0]   = a;
    }
    return id;
}

int gr_reshape(struct gr_graph *g, int a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
    if (a < 0)
        return -1;
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const int id        = new_tensor(g, g->t[a].type, ne);
    if (id >= 0) {
        g->t[id].op       = true;
        g->t[id].view_src = root(g, a);
        g->t[id].src[0]   = a;
    }
    return id;
}

int gr_permute(struct gr_graph *g, int a, int ax0, int ax1, int ax2, int ax3)
{
    if (a < 0)
        return -1;
    const int ax[4] = {ax0, ax1, ax2, ax3};
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) {
        ne[ax[i]] = g->t[a].ne[i];
        nb[ax[i]] = g->t[a].nb[i];
    }
    return gr_view(g, a, ne, nb, 0);
}

int gr_transpose(struct gr_graph *g, int a)
{
    return gr_permute(g, a, 1, 0, 2, 3);
}

int gr_into(struct gr_graph *g, int dst, const int *src)
{
    if (dst < 0)
        return -1;
    const int id = gr_view(g, dst, g->t[dst].ne, g->t[dst].nb, 0);
    if (id >= 0) {
        g->t[id].src[0] = -1;
        set_src(g, id, src);
    }
    return id;
}

void gr_expand(struct gr_graph *g, int id)
{
    if (id < 0 || g->oom || g->t[id].visited)
        return;
    g->t[id].visited = true;
    for (int i = 0; i < GR_MAX_SRC; i++)
        if (g->t[id].src[i] >= 0)
            gr_expand(g, g->t[id].src[i]);
    if (g->t[id].op)
        g->nodes[g->n_nodes++] = id;
    else
        g->leafs[g->n_leafs++] = id;
}

size_t gr_nbytes(const struct gr_graph *g, int id)
{
    const struct gr_tensor *t = &g->t[id];
    size_t size;
    int64_t block;
    type_geometry(t->type, &size, &block);
    for (int i = 0; i < 4; i++)
        if (t->ne[i] <= 0)
            return 0;
    size_t n = block == 1 ? size : (size_t)t->ne[0] * t->nb[0] / (size_t)block;
    for (int i = block == 1 ? 0 : 1; i < 4; i++)
        n += (size_t)(t->ne[i] - 1) * t->nb[i];
    return n;
}

/* ---------------------------------------------------------------- the allocator */

/* Free holes by address; the last one is the open end of the buffer. */
struct holes {
    size_t off[MAX_HOLES], size[MAX_HOLES];
    int n;
    size_t top; /* the high-water mark */
    bool full;
};

static size_t aligned(size_t x)
{
    return (x + ALIGN - 1) / ALIGN * ALIGN;
}

static void hole_remove(struct holes *h, int i)
{
    for (; i < h->n - 1; i++) {
        h->off[i]  = h->off[i + 1];
        h->size[i] = h->size[i + 1];
    }
    h->n--;
}

/* The smallest hole that fits, the last of equals, before the open end. */
static size_t hole_take(struct holes *h, size_t size)
{
    size      = aligned(size);
    int best  = -1;
    size_t bs = SIZE_MAX;
    for (int i = 0; i < h->n - 1; i++)
        if (h->size[i] >= size && h->size[i] <= bs) {
            best = i;
            bs   = h->size[i];
        }
    if (best < 0)
        best = h->n - 1;
    const size_t off = h->off[best];
    h->off[best] += size;
    h->size[best] -= size;
    if (h->size[best] == 0)
        hole_remove(h, best);
    if (off + size > h->top)
        h->top = off + size;
    return off;
}

/* Give bytes back, merging with a neighbouring hole as ggml does (first match wins). */
static void hole_give(struct holes *h, size_t off, size_t size)
{
    size = aligned(size);
    for (int i = 0; i < h->n; i++) {
        if (h->off[i] + h->size[i] == off) {
            h->size[i] += size;
            if (i < h->n - 1 && h->off[i] + h->size[i] == h->off[i + 1]) {
                h->size[i] += h->size[i + 1];
                hole_remove(h, i + 1);
            }
            return;
        }
        if (off + size == h->off[i]) {
            h->off[i] = off;
            h->size[i] += size;
            if (i > 0 && h->off[i - 1] + h->size[i - 1] == h->off[i]) {
                h->size[i - 1] += h->size[i];
                hole_remove(h, i);
            }
            return;
        }
    }
    if (h->n == MAX_HOLES) {
        h->full = true;
        return;
    }
    int at = 0;
    while (at < h->n && h->off[at] < off)
        at++;
    for (int i = h->n; i > at; i--) {
        h->off[i]  = h->off[i - 1];
        h->size[i] = h->size[i - 1];
    }
    h->off[at]  = off;
    h->size[at] = size;
    h->n++;
}

static bool same_layout(const struct gr_tensor *a, const struct gr_tensor *b)
{
    if (a->type != b->type)
        return false;
    for (int i = 0; i < 4; i++)
        if (a->ne[i] != b->ne[i] || a->nb[i] != b->nb[i])
            return false;
    return true;
}

static void allocate(struct gr_graph *g, struct holes *h, int id)
{
    struct gr_tensor *t = &g->t[id];
    if (t->external || t->allocated || t->view_src >= 0)
        return;
    t->allocated = true;
    if (t->inplace)
        for (int i = 0; i < GR_MAX_SRC; i++) {
            if (t->src[i] < 0)
                continue;
            struct gr_tensor *p = &g->t[t->src[i]];
            /* a view is never allocated itself, so ggml never reuses one */
            if (!p->allocated || p->flags & GR_OUTPUT || !same_layout(t, p))
                continue;
            if (p->n_children == 1 && p->n_views == 0) {
                t->offset    = p->offset;
                p->allocated = false;
                return;
            }
        }
    t->offset = hole_take(h, gr_nbytes(g, id));
}

static void release(struct gr_graph *g, struct holes *h, int id)
{
    struct gr_tensor *t = &g->t[id];
    if (t->flags & GR_OUTPUT)
        return;
    hole_give(h, t->offset, gr_nbytes(g, id));
    t->allocated = false;
}

uint64_t gr_reserve(struct gr_graph *g)
{
    if (g->oom)
        return 0;
    struct holes *h = calloc(1, sizeof *h);
    if (!h)
        return 0;
    h->n       = 1;
    h->size[0] = SIZE_MAX / 2;
    for (int i = 0; i < g->n; i++) {
        g->t[i].allocated  = false;
        g->t[i].n_children = g->t[i].n_views = 0;
        g->t[i].offset                       = 0;
    }
    for (int i = 0; i < g->n_leafs; i++)
        allocate(g, h, g->leafs[i]);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct gr_tensor *t = &g->t[g->nodes[i]];
        if (t->view_src >= 0)
            g->t[t->view_src].n_views++;
        if (t->flags & GR_INPUT)
            allocate(g, h, g->nodes[i]);
        for (int j = 0; j < GR_MAX_SRC; j++)
            if (t->src[j] >= 0) {
                g->t[t->src[j]].n_children++;
                if (g->t[t->src[j]].flags & GR_INPUT)
                    allocate(g, h, t->src[j]);
            }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const int id = g->nodes[i];
        for (int j = 0; j < GR_MAX_SRC; j++)
            if (g->t[id].src[j] >= 0)
                allocate(g, h, g->t[id].src[j]);
        allocate(g, h, id);
        for (int j = 0; j < GR_MAX_SRC; j++) {
            const int pid = g->t[id].src[j];
            if (pid < 0)
                continue;
            struct gr_tensor *p = &g->t[pid];
            if (--p->n_children != 0 || p->n_views != 0)
                continue;
            if (p->view_src >= 0) {
                struct gr_tensor *v = &g->t[p->view_src];
                if (--v->n_views == 0 && v->n_children == 0 && v->allocated)
                    release(g, h, p->view_src);
            } else if (p->allocated) {
                release(g, h, pid);
            }
        }
    }
    const uint64_t top = h->full ? 0 : h->top;
    free(h);
    return top;
}
