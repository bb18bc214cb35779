#version 450
// embed_q2_k: token embedding rows (embed_common.glsl) of a weight as dq_q2_k.glsl reads it.
#include "common.glsl"
#include "dq_q2_k.glsl"
#include "embed_common.glsl"
