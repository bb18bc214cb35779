/*
 * vk_shaders.h: the SPIR-V modules built into the library. The Makefile
 * compiles every shaders/NAME.comp with glslc and generates vk_shaders.c
 * (under the build directory) holding this table, so the shaders ship
 * inside the binary and a shader edit rebuilds it.
 */
#ifndef HEARTH_VK_SHADERS_H
#define HEARTH_VK_SHADERS_H

#include <stddef.h>
#include <stdint.h>

struct vk_shader {
    const char *name;     /* the .comp's basename: "mul_q4_0"; NULL ends the table */
    const uint32_t *code; /* SPIR-V words */
    size_t code_len;      /* bytes */
};

/* Every built-in shader, ended by an entry with a NULL name. */
extern const struct vk_shader vk_shaders[];

#endif
