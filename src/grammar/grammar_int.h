/*
 * grammar_int.h: what the grammar engine's files share.
 *
 * A grammar is compiled to a byte-level program: rules of alternatives of
 * sequences, every terminal a set of bytes. The program is one array of
 * positions; a rule's alternatives lie one after another, each ended by
 * GE_END. A parse stack is a chain of interned nodes (pos, parent): pos is
 * the position the stack is at, parent the node to continue with when pos's
 * alternative ends. Equal stacks are the same node id, so a set of stacks
 * deduplicates by id and pushing or popping costs nothing.
 *
 * Files: gbnf.c (text -> program), analysis.c (left recursion, FOLLOW sets,
 * the contexts the token sets are keyed by), stacks.c (node pool, closure,
 * one byte's step), vocab.c (token bytes, sorted), precompute.c (per-context
 * token sets), matcher.c (the public matcher), grammar.c (compile, ref
 * counting, accepts_string), dfa.c (precompute's memoized byte steps).
 */
#ifndef HEARTH_GRAMMAR_INT_H
#define HEARTH_GRAMMAR_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "util/vec.h"

/* ------------------------------------------------------------ program --- */

enum { GE_END = 0, GE_TERM = 1, GE_REF = 2 };
#define GE_KIND(e)    ((e)&3)
#define GE_VAL(e)     ((e) >> 2)
#define GE_MAKE(k, v) ((int32_t)((uint32_t)(v) << 2 | (uint32_t)(k)))

#define GRAMMAR_MAX_REPEAT     4096      /* a bound of {m,n} */
#define GRAMMAR_MAX_MIN_REPEAT 2000      /* the minimum of {m,n}: llama.cpp's limit */
#define GRAMMAR_MAX_ELEMS      (1 << 21) /* positions of a whole program */
#define GRAMMAR_MAX_NEST       256       /* parentheses inside one another */

struct gbyteset {
    uint64_t w[4];
};

static inline bool gbs_has(const struct gbyteset *s, unsigned b)
{
    return s->w[b >> 6] >> (b & 63) & 1;
}

struct gbudget;

struct gprog {
    struct gbudget *budget; /* what compiling may still spend; NULL: unbounded (run time) */
    int32_t *elems;         /* [n_elems] GE_MAKE(kind, set or rule); GE_END ends an alternative */
    int32_t n_elems;
    int32_t *pos_rule; /* [n_elems] the rule each position belongs to */
    int32_t n_rules;
    int32_t *rule_alt0;    /* [n_rules + 1] rule r's alternatives are alts[rule_alt0[r]..[r+1]) */
    int32_t *alts;         /* [n_alts] first position of each alternative */
    char **rule_names;     /* [n_rules] NUL-terminated; helpers are "parent_N" */
    struct gbyteset *sets; /* [n_sets] distinct terminals */
    int32_t n_sets;
    int32_t root;
};

/* ------------------------------------------------------------- budget --- */

/*
 * What one compile may spend, checked as it runs, so that no grammar text
 * holds a thread for long whatever its shape: nested bounded repetitions
 * multiply contexts, a long alternation multiplies stacks, and each
 * analysis pass, closure and trie walk is counted. Two counters, because
 * their units differ by the vocabulary: `work` is the vocabulary-free part
 * (an analysis pass's element, 1 step, a few ns; a closure's node visit,
 * GBUDGET_VISIT steps: a hashed intern and its share of a sort, 20 to 40
 * ns), `walk` the trie nodes the precompute visits (about 1 ns each, most
 * of them table reads), which a large vocabulary multiplies for every
 * grammar alike. The contexts are bounded on their own: each costs a
 * walk and a set to intern, about 12 us on a small vocabulary.
 * Measured (tests/unit/test_grammar*, test_schema, test_oai_grammar,
 * test_lark): the largest ordinary grammar spends under 1M steps of work
 * and 1,520 contexts; (([a-z]){5,250}){0,250} (62,500 contexts, found by
 * fuzz_grammar) compiled in 0.73 s before the bound was halved to 32,768;
 * the worst grammar built against the steps, (([a-z]){0,250}){0,250}, is
 * refused in 0.25 s (with the machine's 2 cores loaded 2-fold; 7 s under
 * ASan and UBSan at -O1, which the fuzz smoke's -timeout allows for). On a
 * 152k vocabulary GRAMMAR_MAX_WALK is several seconds: a string of up to
 * 4096 characters (4096 contexts, each accepting most tokens) needs half
 * of it.
 * The caller's cancel flag is read every GBUDGET_POLL steps.
 */
#define GRAMMAR_MAX_CONTEXTS (1 << 15)          /* parser states: (p, q) keys of a grammar */
#define GRAMMAR_MAX_WORK     (INT64_C(1) << 24) /* analysis and closure steps */
#define GRAMMAR_MAX_WALK     (INT64_C(1) << 32) /* trie nodes walked by the precompute */
#define GBUDGET_POLL         4096
#define GBUDGET_VISIT        4 /* steps of one closure visit */

struct gbudget {
    int64_t work, walk; /* spent so far */
    int64_t max_work, max_walk;
    int64_t next_poll;        /* work + walk at which the limits and cancel are checked next */
    const atomic_int *cancel; /* nonzero: stop; NULL: never */
    enum hearth_status st;    /* HEARTH_OK; HEARTH_EINVAL past a limit, HEARTH_ECANCELED */
    char msg[200];            /* st's sentence */
};

/* A budget at the limits above. */
void gbudget_init(struct gbudget *b, const atomic_int *cancel);
/* Records the failure (the first one only) and returns false. */
bool gbudget_fail(struct gbudget *b, enum hearth_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool gbudget_check(struct gbudget *b);

/*
 * Spends n analysis or closure steps (walk: trie steps) of b (NULL: free);
 * false once b is spent or cancelled, b->st and b->msg saying which. Once
 * false, false until the end of the compile.
 */
static inline bool gbudget_spend(struct gbudget *b, int64_t n)
{
    if (!b)
        return true;
    b->work += n;
    return b->work + b->walk < b->next_poll || gbudget_check(b);
}

static inline bool gbudget_walk(struct gbudget *b, int64_t n)
{
    if (!b)
        return true;
    b->walk += n;
    return b->work + b->walk < b->next_poll || gbudget_check(b);
}

/* Parses GBNF into *out (zeroed on entry); HEARTH_EINVAL with "line L, column C: what". */
enum hearth_status gbnf_parse(const char *text, size_t len, const char *root, struct gprog *out,
                              char *err, size_t err_len);
void gprog_free(struct gprog *g);

/* ----------------------------------------------------------- analysis --- */

/*
 * Whether some rule can reach itself without consuming a byte (directly,
 * or after rules that match the empty string): then expanding it would
 * never end. HEARTH_EINVAL naming the rule.
 */
enum hearth_status gprog_check_left_recursion(const struct gprog *g, char *err, size_t err_len);

/* A (position, parent's position) pair the token sets are precomputed for; q = -1: no parent. */
struct gctx_key {
    int32_t p, q;
};

/*
 * Every key a live stack can have, sorted by (p, q), and for every rule the
 * bytes that can follow it (what a stack may read after popping out of a
 * key's parent). Both malloc'd.
 */
enum hearth_status gprog_contexts(const struct gprog *g, struct gctx_key **keys, int32_t *n_keys,
                                  struct gbyteset **follow, char *err, size_t err_len);

/* -------------------------------------------------------------- stacks --- */

#define GS_EMPTY        (-1) /* the empty stack: the whole root has matched */
#define GS_BOTTOM       (-2) /* precompute: below a local stack, what the real one holds */
#define GPOOL_MAX_NODES (1 << 22)

struct gnode {
    int32_t pos;    /* position in the program */
    int32_t parent; /* node id, GS_EMPTY or GS_BOTTOM */
    int32_t depth;  /* nodes in the chain, this one included */
};

VEC_DEFINE(ivec, int32_t, int32_t)

/* Interned nodes plus the scratch one closure needs. */
struct gpool {
    struct gnode *nodes; /* [n] */
    int32_t n, cap;
    int32_t *table; /* [mask + 1] open addressing: node id or -1 */
    uint32_t mask;
    uint32_t *stamp; /* [cap] closure visit marks */
    uint32_t gen;
    struct ivec work;  /* closure's worklist */
    struct ivec seeds; /* gstep_byte's (pos, parent) pairs */
};

void gpool_init(struct gpool *p);
void gpool_free(struct gpool *p);
void gpool_reset(struct gpool *p);

enum { GX_ACCEPT = 1, GX_POP = 2 };

/*
 * One closure: visits seeds (node ids, or GS_EMPTY / GS_BOTTOM), expands
 * rule references and ended alternatives, and appends the stacks whose top
 * is a terminal to out, each once. *flags gets GX_ACCEPT when the empty
 * stack was reached, GX_POP when a local stack's bottom was. seed_pairs:
 * seeds are (pos, parent) pairs (n_seeds pairs) rather than node ids.
 * False with err when a bound is passed.
 */
bool gstep_closure(const struct gprog *g, struct gpool *p, const int32_t *seeds, int32_t n_seeds,
                   bool seed_pairs, struct ivec *out, int *flags, char *err, size_t err_len);

/* Stacks in[0..n) after byte b: appended to out, with flags as above. */
bool gstep_byte(const struct gprog *g, struct gpool *p, const int32_t *in, int32_t n, unsigned b,
                struct ivec *out, int *flags, char *err, size_t err_len);

/* Interns (pos, parent); -1 with err when a bound is passed. */
int32_t gpool_intern(struct gpool *p, int32_t pos, int32_t parent, char *err, size_t err_len);

/* The stacks at the start of the root (closure included); *accept when the root matches "". */
bool grammar_start(const struct gprog *g, struct gpool *pool, struct ivec *out, bool *accept,
                   char *err, size_t err_len);
/*
 * Runs s[0..n) from the stacks in cur (tmp: scratch); cur ends as the
 * stacks after it, *accept whether the root has then matched. An empty cur
 * with !*accept: rejected. False with err when a bound was passed.
 */
bool grammar_feed(const struct gprog *g, struct gpool *pool, struct ivec *cur, struct ivec *tmp,
                  bool *accept, const uint8_t *s, size_t n, char *err, size_t err_len);

/* ----------------------------------------------------------------- dfa --- */

/*
 * The byte steps of precompute's local stacks, memoized: a state is a set
 * of stacks (node ids in the DFA's own pool, shared by every context) and
 * the GX_* flags of the step that reached it; each (state, byte class)
 * step is run once per compile. Contexts of one grammar reach the same
 * states (the k-th and the (k+1)-th place of an unrolled repetition are
 * one byte apart), so most steps of a walk are a table read.
 */
struct gdfa {
    const struct gprog *g;
    struct gpool pool;
    uint8_t cls[256]; /* byte -> class; bytes no terminal tells apart share a class */
    int32_t n_cls;    /* 1 .. 256 */
    int32_t n, cap;   /* states; state 0 is the dead one (no stack, no flag) */
    int32_t *set0;    /* [cap + 1] state s's stacks are stacks.v[set0[s] .. set0[s + 1]), sorted */
    struct ivec stacks;
    uint8_t *flags;  /* [cap] GX_* */
    uint32_t *hash;  /* [cap] */
    int32_t *next;   /* [n_dense * n_cls] the state after a byte of each class; -1: not run yet */
    int32_t n_dense; /* states with a row in next: those below n_dense_max */
    int32_t n_dense_max; /* GDFA_DENSE_BYTES / the row's bytes */
    int64_t *far; /* [far_mask + 1] steps of the other states: s << 40 | cls << 32 | t, or -1 */
    uint32_t far_mask;
    int32_t n_far;
    int32_t *table; /* [mask + 1] open addressing: state id or -1 */
    uint32_t mask;
    struct ivec tmp;
};

/* The dense table's bound: past it (a grammar tracking a prefix per trie node) steps are hashed. */
#ifndef GDFA_DENSE_BYTES /* a test build may shrink it to run the hashed path */
#define GDFA_DENSE_BYTES (32u << 20)
#endif

#define GDFA_ENOMEM (-2) /* what gdfa_start and gdfa_step return when out of memory */

/* An empty DFA for g (which must outlive it); false when out of memory. */
bool gdfa_init(struct gdfa *d, const struct gprog *g);
void gdfa_free(struct gdfa *d);
/* Forgets every state and node (bounds memory across many contexts); false when out of memory. */
bool gdfa_reset(struct gdfa *d);
/*
 * The state of the local stack [p, q, BOTTOM] (q = -1: [p]); -1 with err
 * when a bound is passed, GDFA_ENOMEM with err when out of memory.
 */
int32_t gdfa_start(struct gdfa *d, int32_t p, int32_t q, char *err, size_t err_len);
/* Runs one step not run yet; as gdfa_step. */
int32_t gdfa_step_slow(struct gdfa *d, int32_t s, unsigned b, char *err, size_t err_len);

static inline bool gdfa_alive(const struct gdfa *d, int32_t s)
{
    return d->set0[s + 1] > d->set0[s];
}

/* The state after byte b from state s (which must be alive); errors as gdfa_start. */
static inline int32_t gdfa_step(struct gdfa *d, int32_t s, unsigned b, char *err, size_t err_len)
{
    int32_t t = s < d->n_dense ? d->next[(size_t)s * (size_t)d->n_cls + d->cls[b]] : -1;
    return t >= 0 ? t : gdfa_step_slow(d, s, b, err, err_len);
}

/* --------------------------------------------------------------- vocab --- */

/* A node of the vocabulary's byte trie: a prefix some TEXT token has. */
struct gtrie_node {
    uint32_t end; /* the index after this node's subtree (nodes are in preorder) */
    int32_t lo;   /* the subtree's tokens are order[lo .. the next subtree's lo), those ending here
                     first */
    uint32_t db;  /* depth << 9 | GT_ENDS | the prefix's last byte; depth 1 .. max_len */
};

#define GT_ENDS          0x100u     /* db: some token ends at this node */
#define GV_MAX_TOKEN_LEN (1u << 23) /* bytes of one token: a trie node's depth fits in 23 bits */

static inline uint32_t gtrie_depth(const struct gtrie_node *n)
{
    return n->db >> 9;
}

struct grammar_vocab {
    int32_t n;
    uint8_t *kinds;          /* [n] enum grammar_token_kind */
    uint32_t *off;           /* [n] start of token i's bytes in bytes */
    uint32_t *lens;          /* [n] */
    char *bytes;             /* all tokens' bytes, concatenated */
    int32_t n_text;          /* TEXT tokens with at least one byte */
    int32_t *order;          /* [n_text] those tokens sorted by their bytes: a trie in DFS order */
    uint32_t *lcp;           /* [n_text] bytes order[i] shares with order[i - 1] (0 for i = 0) */
    struct gtrie_node *trie; /* [n_trie] every distinct prefix of those tokens, in preorder */
    int32_t n_trie;          /* about 3.5 per token (540k for a 152k vocabulary) */
    int32_t *eog;            /* [n_eog] */
    int32_t n_eog;
    uint32_t max_len; /* longest token, bytes */
};

struct tokenizer;
/* A tokenizer's vocab, as grammar_vocab_from_model describes (vocab-only GGUF files have no model).
 */
struct grammar_vocab *grammar_vocab_from_tokenizer(const struct tokenizer *t);

static inline const uint8_t *gv_bytes(const struct grammar_vocab *v, int32_t tok)
{
    return (const uint8_t *)v->bytes + v->off[tok];
}

/* ----------------------------------------------------------- grammar --- */

/* A token that pops out of its context's parent after k bytes: the rest is the parent's to judge.
 */
struct gunc {
    int32_t tok;
    uint32_t k;   /* bytes consumed in the context, 1 <= k < the token's length */
    uint32_t lcp; /* bytes this entry's rest shares with the previous entry's (sorted by rest) */
};

/* A set of tokens: a bitset when dense, else a sorted list. */
struct gtokset {
    int32_t n;      /* tokens in the set */
    uint32_t *bits; /* [(n_vocab + 31) / 32] or NULL */
    int32_t *list;  /* [n] sorted, when bits is NULL */
};

struct gctx {
    int32_t p, q; /* the key */
    int32_t acc;  /* index into grammar.accs: tokens accepted whatever lies below */
    int32_t unc0; /* uncertain tokens: grammar.unc[unc0 .. unc0 + n_unc), sorted by rest */
    int32_t n_unc;
    int32_t *by_tok; /* [n_unc] indexes into that run sorted by token (for one-token checks) */
};

struct grammar {
    int refs; /* atomic */
    struct gprog prog;
    const struct grammar_vocab *vocab;
    struct gctx *ctxs; /* [n_ctxs] sorted by (p, q) */
    int32_t n_ctxs;
    int32_t *ctx_first;   /* [n_elems + 1] contexts of terminal p: ctxs[ctx_first[p]..[p+1]) */
    struct gtokset *accs; /* [n_accs] distinct accepted sets */
    int32_t n_accs;
    struct gunc *unc; /* [n_unc] */
    int64_t n_unc;
    size_t mem_bytes; /* what the precomputed tables hold */
};

/* Builds the contexts and their token sets for g->vocab. */
enum hearth_status grammar_precompute(struct grammar *g, char *err, size_t err_len);
void grammar_precompute_free(struct grammar *g);

/* The context of a stack top: index into g->ctxs, or -1. */
int32_t grammar_find_ctx(const struct grammar *g, int32_t p, int32_t q);

/* Bytes held by g's precomputed tables (for benchmarks). */
size_t grammar_mem_bytes(const struct grammar *g);

/*
 * The reference the fast mask is tested against: every token's bytes run
 * through the matcher's stacks. Same contract as grammar_matcher_mask.
 */
int32_t grammar_matcher_mask_naive(struct grammar_matcher *m, uint32_t *allowed, char *err,
                                   size_t err_len);

#endif
