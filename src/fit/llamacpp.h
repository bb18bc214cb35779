/*
 * llamacpp.h: what llama.cpp's CPU build allocates for a llama-server run
 * of a GGUF file (`hearth fit --runtime llama.cpp`), from the file's header
 * alone: its model buffers (the mapped file range and the weights it
 * repacks), its K/V and recurrent-state caches, its logits buffer and its
 * compute buffer (the high-water mark of ggml's allocator over its reserve
 * graph). The flags mean what llama-server's mean: -c is the context all
 * slots share.
 *
 * The caches' formulas were read from llama.cpp's source; the compute
 * buffer is a replay of its allocator over its reserve graphs
 * (llamacpp_graph.h). Both are held to the buffer sizes it allocated
 * (tests/unit/llamacpp_buffers.tsv: 27 files, ctx {512, 4096} x parallel
 * {1, 4} x ubatch {128, 512} x K/V {f16, q8_0}, flash attention on and
 * off), byte for byte.
 */
#ifndef HEARTH_FIT_LLAMACPP_H
#define HEARTH_FIT_LLAMACPP_H

#include <stdbool.h>
#include <stdint.h>

#include "hearth.h"
#include "util/dtype.h"

/* Which weights the CPU backend repacks into its interleaved layouts depends on the CPU. */
enum llamacpp_isa {
    LLAMACPP_ISA_NONE,   /* no repacking (a CPU without AVX2 or NEON dot products) */
    LLAMACPP_ISA_AVX2,   /* x86 with AVX2: Q4_0, Q4_K, IQ4_NL */
    LLAMACPP_ISA_AVX512, /* and Q2_K */
    LLAMACPP_ISA_NEON,   /* AArch64 with dot products: Q4_0, Q4_K, IQ4_NL, Q5_K, Q6_K, Q8_0 */
};

struct llamacpp_params {
    int32_t n_ctx;      /* -c, shared by the slots; 0 = the training context (llama-server's) */
    int32_t n_parallel; /* -np, >= 1 */
    bool unified;       /* one K/V stream for every slot (-kvu; llama-server's when -np is not
                           given) instead of one per slot */
    int32_t n_batch;    /* -b (llama-server: 2048) */
    int32_t n_ubatch;   /* -ub (llama-server: 512) */
    enum dtype type_k;  /* -ctk: F32, F16, BF16, Q8_0, Q4_0, ... */
    enum dtype type_v;  /* -ctv */
    bool flash_attn;    /* -fa (auto is on for the CPU) */
    enum llamacpp_isa isa;
};

/* Bytes by buffer, as llama.cpp's memory breakdown names them. */
struct llamacpp_memory {
    int32_t n_ctx;     /* the context it makes: -c rounded up to 256 (per slot, times slots) */
    int32_t n_ctx_seq; /* cells per K/V stream */
    uint64_t mapped;   /* CPU_Mapped: the file range of the weights it does not repack */
    uint64_t repack;   /* CPU_REPACK: the repacked weights' copy */
    uint64_t kv;       /* the K/V cache (both buffers of a sliding-window model) */
    uint64_t rs;       /* the recurrent state cache (hybrid models) */
    uint64_t output;   /* logits rows */
    uint64_t compute;  /* the CPU compute buffer */
};

/*
 * The memory of a llama-server run of path with p. HEARTH_OK, or an error
 * with one sentence in err: the GGUF reader's, an architecture hearth does
 * not know, a configuration llama.cpp refuses (a quantized V cache without
 * flash attention, a quantized cache whose block does not divide a head).
 */
enum hearth_status llamacpp_memory(const char *path, const struct llamacpp_params *p,
                                   struct llamacpp_memory *out, char *err, size_t err_len);

struct hearth_model;
/* The same for a model model_describe read (a planner asks many questions of one file). */
enum hearth_status llamacpp_memory_of(const struct hearth_model *m, const struct llamacpp_params *p,
                                      struct llamacpp_memory *out, char *err, size_t err_len);

/*
 * Whether llama-server takes draft as target's draft model
 * (common_speculative_are_compatible): the same tokenizer model, BOS and
 * EOS ids, vocabularies within 128 tokens of each other and the same token
 * texts from id 5 on. Its add-BOS/EOS flags, whose defaults llama.cpp
 * derives from the pre-tokenizer, are not compared. false with the first
 * difference in err.
 */
bool llamacpp_vocab_compatible(const struct hearth_model *target, const struct hearth_model *draft,
                               char *err, size_t err_len);

/* The ISA of this CPU as llama.cpp's repacking sees it. */
enum llamacpp_isa llamacpp_isa_host(void);

#endif
