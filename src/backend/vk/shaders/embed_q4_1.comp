#version 450
// embed_q4_1: token embedding rows (embed_common.glsl) of a weight as dq_q4_1.glsl reads it.
#include "common.glsl"
#include "dq_q4_1.glsl"
#include "embed_common.glsl"
