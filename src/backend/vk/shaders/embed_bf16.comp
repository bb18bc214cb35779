#version 450
// embed_bf16: token embedding rows (embed_common.glsl) of a weight as dq_bf16.glsl reads it.
#include "common.glsl"
#include "dq_bf16.glsl"
#include "embed_common.glsl"
