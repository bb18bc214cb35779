#version 450
// embed_q5_0: token embedding rows (embed_common.glsl) of a weight as dq_q5_0.glsl reads it.
#include "common.glsl"
#include "dq_q5_0.glsl"
#include "embed_common.glsl"
