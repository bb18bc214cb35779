#version 450
// embed_f32: token embedding rows (embed_common.glsl) of a weight as dq_f32.glsl reads it.
#include "common.glsl"
#include "dq_f32.glsl"
#include "embed_common.glsl"
