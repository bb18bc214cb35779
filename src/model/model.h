/*
 * model.h: the loaded model (weights in the GGUF mapping, hyperparameters,
 * tokenizer) and the context that runs it (KV cache, the backend's buffers
 * and state). Internal to the library; include/hearth.h is the public face.
 */
#ifndef HEARTH_MODEL_H
#define HEARTH_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "backend/backend.h"
#include "hearth.h"
#include "model/kv.h"
#include "model/types.h"
#include "model/snapshot.h"
#include "chat/chat.h"
#include "text/tokenizer.h"

/* The model's and the context's structs are model/types.h's, which the backends read. */

/*
 * Hands w, read only through matmul, to the backend of layer l's stage to
 * prepare (the CPU repacks it, a device backend uploads it; l = n_layer:
 * the output's stage); model_release_weight frees that copy with the same
 * backend. HEARTH_ENOMEM with a sentence when the backend cannot.
 */
enum hearth_status model_prepare_weight(struct hearth_model *m, int32_t l, struct weight *w,
                                        char *err, size_t err_len);
void model_release_weight(const struct hearth_model *m, int32_t l, struct weight *w);

/* Whether every backend the model's stages use runs weights of this type. */
bool model_weight_supported(const struct hearth_model *m, enum dtype type);
/* The first of the model's stage backends that does not run weights of type, or NULL. */
const struct backend *model_weight_refuser(const struct hearth_model *m, enum dtype type);

/* <arch>.key of m's file as a u32: false when absent or not a number that fits. */
bool model_arch_u32(const struct hearth_model *m, const char *key, uint32_t *out);

/*
 * Checks that draft can draft for target: the same vocabulary, token by
 * token, and the same BOS and EOS (both need their tokenizers: loaded, or
 * model_describe's with model_load_tokenizer). false with the first
 * difference in err.
 */
bool model_vocab_match(const struct hearth_model *target, const struct hearth_model *draft,
                       char *err, size_t err_len);

/* Reads a described model's tokenizer (for model_vocab_match), as a load does. */
enum hearth_status model_load_tokenizer(struct hearth_model *m, char *err, size_t err_len);

/*
 * A model read from path's header alone (gguf_open validates the whole
 * table, but no tensor is read): the architecture, the hyperparameters,
 * the layers' kinds and n_vocab, enough for the memory law. No tokenizer,
 * no weights, no placement; hearth_model_free frees it. mtp: as if loaded
 * with its MTP head.
 */
enum hearth_status model_describe(const char *path, bool mtp, struct hearth_model **out, char *err,
                                  size_t err_len);

/* The stage of layer l (l = n_layer: the output's, the last). */
const struct stage_place *model_stage_of(const struct hearth_model *m, int32_t l);

/*
 * Decides m->stage from p (n_gpu_layers, devices, layer_split; m->hp.n_layer
 * known). HEARTH_EINVAL for a split that does not add up to n_layer, an
 * unknown backend, or flags that contradict; HEARTH_EUNSUPPORTED when a GPU
 * is asked for and none can be used. One sentence in err.
 */
enum hearth_status model_place(struct hearth_model *m, const struct hearth_model_params *p,
                               char *err, size_t err_len);

/*
 * Finds a 2-D weight {n_in, n_out} (optional: absent leaves w zeroed and is
 * OK) or a 1-D vector of n elements copied to a new f32 array (owned), and
 * checks shape and type, as the loader does for every tensor.
 */
enum hearth_status model_get_weight(struct hearth_model *m, const char *name, int64_t n_in,
                                    int64_t n_out, bool optional, struct weight *w, char *err,
                                    size_t err_len);
enum hearth_status model_get_vector(struct hearth_model *m, const char *name, int64_t n,
                                    bool optional, float **out, char *err, size_t err_len);

#endif
