#version 450
// embed_iq4_xs: token embedding rows (embed_common.glsl) of a weight as dq_iq4_xs.glsl reads it.
#include "common.glsl"
#include "dq_iq4_xs.glsl"
#include "embed_common.glsl"
