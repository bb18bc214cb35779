/*
 * budget.h: device memory at load (budget.c). What each stage will hold
 * (its weights, its K/V, its activation buffers, the output's logits) is
 * summed per device and compared with the memory the device offers
 * (struct backend's device_memory) before anything is uploaded or
 * allocated, so a model too large for a GPU is refused at startup with the
 * figures, never by a failed allocation in the middle of a request.
 */
#ifndef HEARTH_BUDGET_H
#define HEARTH_BUDGET_H

#include "model/model.h"

/*
 * Sets m->stage[i].weight_bytes from the file's tensor table (the stages
 * placed): every blk.L.* tensor of the stage's layers, token_embd on the
 * first stage, output.weight and output_norm on the last.
 */
void budget_weights(struct hearth_model *m);

/*
 * Before the weights are uploaded: each device's stages' weights against
 * its memory. HEARTH_ENOMEM with a sentence giving both figures in MiB and
 * what to do; HEARTH_OK where every device has room or none is checked.
 */
enum hearth_status budget_check_model(const struct hearth_model *m, char *err, size_t err_len);

/*
 * Before the stages' ctx_init: sets each ctx->stages[i]'s kv_bytes and
 * act_bytes (ctx->kv initialised, ctx->stages[i].place set) and checks each
 * device's weights plus those against its memory, as budget_check_model.
 */
enum hearth_status budget_check_context(struct hearth_context *ctx, char *err, size_t err_len);

/* "cpu" or "vulkan1": the device of place as `hearth devices` names it, into name. */
void budget_device_name(const struct stage_place *place, char *name, size_t name_len);

#endif
