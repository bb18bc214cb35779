#version 450
// embed_f16: token embedding rows (embed_common.glsl) of a weight as dq_f16.glsl reads it.
#include "common.glsl"
#include "dq_f16.glsl"
#include "embed_common.glsl"
