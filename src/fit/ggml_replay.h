/*
 * ggml_replay.h: ggml's graph order and its graph allocator (ggml-alloc),
 * replayed over a described graph, so that `hearth fit --runtime llama.cpp`
 * can give the compute buffer a llama.cpp build would reserve where no
 * closed form does (the allocator's freed holes decide where a tensor
 * lands). Tensors carry only what the allocator reads: shape, strides,
 * element type, sources, the tensor a view looks into, and the input and
 * output flags. Nothing is allocated for real.
 */
#ifndef HEARTH_GGML_REPLAY_H
#define HEARTH_GGML_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_MAX_SRC 10
/* ggml's integer element types; the float and quantized ones are enum dtype's ids */
#define GR_I32 26u
#define GR_I64 27u

enum { GR_INPUT = 1, GR_OUTPUT = 2 };

struct gr_tensor {
    uint32_t type;
    int64_t ne[4];
    size_t nb[4];
    int src[GR_MAX_SRC]; /* tensor ids, -1 where absent */
    int view_src;        /* the tensor a view's bytes belong to, -1 if none */
    unsigned flags;      /* GR_INPUT, GR_OUTPUT */
    bool external;       /* in a buffer of its own: a weight or a cache */
    bool op;             /* computed (a node); false: a leaf (an input, a weight) */
    bool inplace;        /* its op may take a parent's memory (ggml_op_can_inplace) */
    /* the replay's state */
    bool visited, allocated;
    int n_children, n_views;
    size_t offset;
};

struct gr_graph {
    struct gr_tensor *t;
    int n, cap;
    int *nodes, *leafs; /* in ggml's visiting order */
    int n_nodes, n_leafs;
    bool oom;
};

void gr_init(struct gr_graph *g);
void gr_free(struct gr_graph *g);

/* A leaf: an input (GR_INPUT) or, external, a weight or cache (ne: 1 for unused dims). */
int gr_leaf(struct gr_graph *g, uint32_t type, bool external, unsigned flags, int64_t ne0,
            int64_t ne1, int64_t ne2, int64_t ne3);
/* A contiguous result of an op over the sources (-1 ends the list). */
int gr_op(struct gr_graph *g, bool inplace, uint32_t type, const int64_t ne[4], const int *src);
/* A view of a's bytes: shape ne, strides nb, at byte offset offs of a. */
int gr_view(struct gr_graph *g, int a, const int64_t ne[4], const size_t nb[4], size_t offs);
/* a's bytes seen as a contiguous tensor of shape ne (ggml_reshape). */
int gr_reshape(struct gr_graph *g, int a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* ggml_permute's axes: dim i of a goes to dim ax[i]. */
int gr_permute(struct gr_graph *g, int a, int ax0, int ax1, int ax2, int ax3);
int gr_transpose(struct gr_graph *g, int a);
/* An op that writes into dst's bytes (ggml_cpy, an _inplace op, set_rows): a view of dst. */
int gr_into(struct gr_graph *g, int dst, const int *src);

/* ggml_build_forward_expand: visit t's sources depth first, then t. */
void gr_expand(struct gr_graph *g, int t);
/* ggml_nbytes */
size_t gr_nbytes(const struct gr_graph *g, int t);

/*
 * The compute buffer ggml-alloc's reserve of the expanded graph asks for
 * (one CPU buffer, 32-byte alignment): inputs first, each node then placed
 * in the best-fitting freed hole or on top, in place over a parent where
 * the op allows, and freed after its last reader. 0 when out of memory.
 */
uint64_t gr_reserve(struct gr_graph *g);

#endif
