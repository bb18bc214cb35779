/*
 * vk_pipeline.c: compute pipelines made from the built-in SPIR-V
 * (vk_shaders.h), and sequences: a command buffer recorded with a run of
 * dispatches, each bound to its buffers through a descriptor set from the
 * sequence's pool and followed by a barrier, then submitted and waited on
 * with a fence. One sequence per micro-batch step; its pool and command
 * buffer are reset at the next begin, so a step allocates nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/vk/vk_internal.h"
#include "backend/vk/vk_shaders.h"
#include "util/errfmt.h"

/* Storage buffers one pipeline binds at most, and push-constant bytes (the spec's minimum). */
#define VK_MAX_BUFS 8
#define VK_MAX_PUSH 128
/* Dispatches one sequence records at most: a layer's operations with room to spare. */
#define VK_SEQ_MAX 1024

static void pipe_free(struct vk_dev *d, struct vk_pipe *p)
{
    const struct vk_fns *fn = &d->fn;
    if (p->pipe)
        fn->vkDestroyPipeline(d->dev, p->pipe, NULL);
    if (p->layout)
        fn->vkDestroyPipelineLayout(d->dev, p->layout, NULL);
    if (p->dsl)
        fn->vkDestroyDescriptorSetLayout(d->dev, p->dsl, NULL);
    free(p);
}

void vk_dev_pipes_free(struct vk_dev *d)
{
    while (d->pipes) {
        struct vk_pipe *next = d->pipes->next;
        pipe_free(d, d->pipes);
        d->pipes = next;
    }
}

static enum hearth_status pipe_make(struct vk_dev *d, const struct vk_shader *sh, uint32_t n_bufs,
                                    uint32_t push_len, struct vk_pipe *p, char *err, size_t err_len)
{
    const struct vk_fns *fn = &d->fn;
    VkDescriptorSetLayoutBinding bind[VK_MAX_BUFS];
    for (uint32_t i = 0; i < n_bufs; i++)
        bind[i] = (VkDescriptorSetLayoutBinding){
            .binding         = i,
            .descriptorType  = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags      = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    const VkDescriptorSetLayoutCreateInfo dci = {
        .sType        = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = n_bufs,
        .pBindings    = bind,
    };
    VkResult r = fn->vkCreateDescriptorSetLayout(d->dev, &dci, NULL, &p->dsl);
    if (r != VK_SUCCESS) {
        p->dsl = VK_NULL_HANDLE;
        return vk_fail("vkCreateDescriptorSetLayout", r, err, err_len);
    }
    const VkPushConstantRange range = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = push_len};
    const VkPipelineLayoutCreateInfo lci = {
        .sType                  = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount         = 1,
        .pSetLayouts            = &p->dsl,
        .pushConstantRangeCount = push_len ? 1 : 0,
        .pPushConstantRanges    = &range,
    };
    if ((r = fn->vkCreatePipelineLayout(d->dev, &lci, NULL, &p->layout)) != VK_SUCCESS) {
        p->layout = VK_NULL_HANDLE;
        return vk_fail("vkCreatePipelineLayout", r, err, err_len);
    }
    const VkShaderModuleCreateInfo mci = {
        .sType    = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = sh->code_len,
        .pCode    = sh->code,
    };
    VkShaderModule mod;
    if ((r = fn->vkCreateShaderModule(d->dev, &mci, NULL, &mod)) != VK_SUCCESS)
        return vk_fail("vkCreateShaderModule", r, err, err_len);
    const VkComputePipelineCreateInfo pci = {
        .sType  = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage  = {.sType  = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                   .stage  = VK_SHADER_STAGE_COMPUTE_BIT,
                   .module = mod,
                   .pName  = "main"},
        .layout = p->layout,
    };
    r = fn->vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &pci, NULL, &p->pipe);
    fn->vkDestroyShaderModule(d->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        p->pipe = VK_NULL_HANDLE;
        return vk_fail("vkCreateComputePipelines", r, err, err_len);
    }
    return HEARTH_OK;
}

bool vk_shader_built(const char *name)
{
    for (const struct vk_shader *sh = vk_shaders; sh->name; sh++)
        if (!strcmp(sh->name, name))
            return true;
    return false;
}

enum hearth_status vk_pipe_get(struct vk_dev *d, const char *name, uint32_t n_bufs,
                               uint32_t push_len, struct vk_pipe **out, char *err, size_t err_len)
{
    *out = NULL;
    for (struct vk_pipe *p = d->pipes; p; p = p->next)
        if (!strcmp(p->name, name)) {
            if (p->n_bufs != n_bufs || p->push_len != push_len)
                return fail(HEARTH_EINVAL, err, err_len,
                            "vulkan: pipeline %s was made with %u buffers and %u push bytes, "
                            "asked for %u and %u",
                            name, p->n_bufs, p->push_len, n_bufs, push_len);
            *out = p;
            return HEARTH_OK;
        }
    const struct vk_shader *sh = vk_shaders;
    while (sh->name && strcmp(sh->name, name))
        sh++;
    if (!sh->name)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: no built-in shader %s", name);
    if (n_bufs == 0 || n_bufs > VK_MAX_BUFS || push_len > VK_MAX_PUSH || push_len % 4)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: pipeline %s: %u buffers and %u push bytes (1..%d, 0..%d in words)",
                    name, n_bufs, push_len, VK_MAX_BUFS, VK_MAX_PUSH);
    struct vk_pipe *p = calloc(1, sizeof *p);
    if (!p)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    p->name               = sh->name;
    p->n_bufs             = n_bufs;
    p->push_len           = push_len;
    enum hearth_status st = pipe_make(d, sh, n_bufs, push_len, p, err, err_len);
    if (st != HEARTH_OK) {
        pipe_free(d, p);
        return st;
    }
    p->next  = d->pipes;
    d->pipes = p;
    *out     = p;
    return HEARTH_OK;
}

/* ------------------------------------------------------------ sequences --- */

enum hearth_status vk_seq_new(struct vk_dev *d, struct vk_seq **out, char *err, size_t err_len)
{
    *out                    = NULL;
    const struct vk_fns *fn = &d->fn;
    struct vk_seq *s        = calloc(1, sizeof *s);
    if (!s)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    s->d                                 = d;
    const VkDescriptorPoolSize size      = {.type            = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                            .descriptorCount = VK_SEQ_MAX * VK_MAX_BUFS};
    const VkDescriptorPoolCreateInfo dci = {
        .sType         = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets       = VK_SEQ_MAX,
        .poolSizeCount = 1,
        .pPoolSizes    = &size,
    };
    const VkCommandBufferAllocateInfo cai = {
        .sType              = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool        = d->pool,
        .level              = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    const VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    enum hearth_status st;
    VkResult r;
    if ((r = fn->vkCreateDescriptorPool(d->dev, &dci, NULL, &s->dpool)) != VK_SUCCESS) {
        s->dpool = VK_NULL_HANDLE;
        st       = vk_fail("vkCreateDescriptorPool", r, err, err_len);
        goto fail;
    }
    if ((r = fn->vkAllocateCommandBuffers(d->dev, &cai, &s->cb)) != VK_SUCCESS) {
        s->cb = VK_NULL_HANDLE;
        st    = vk_fail("vkAllocateCommandBuffers", r, err, err_len);
        goto fail;
    }
    if ((r = fn->vkCreateFence(d->dev, &fci, NULL, &s->fence)) != VK_SUCCESS) {
        s->fence = VK_NULL_HANDLE;
        st       = vk_fail("vkCreateFence", r, err, err_len);
        goto fail;
    }
    *out = s;
    return HEARTH_OK;
fail:
    vk_seq_free(s);
    return st;
}

void vk_seq_free(struct vk_seq *s)
{
    if (!s)
        return;
    const struct vk_fns *fn = &s->d->fn;
    if (s->fence)
        fn->vkDestroyFence(s->d->dev, s->fence, NULL);
    if (s->cb)
        fn->vkFreeCommandBuffers(s->d->dev, s->d->pool, 1, &s->cb);
    if (s->dpool)
        fn->vkDestroyDescriptorPool(s->d->dev, s->dpool, NULL);
    free(s);
}

enum hearth_status vk_seq_begin(struct vk_seq *s, char *err, size_t err_len)
{
    const struct vk_fns *fn = &s->d->fn;
    VkResult r              = fn->vkResetCommandBuffer(s->cb, 0);
    if (r != VK_SUCCESS)
        return vk_fail("vkResetCommandBuffer", r, err, err_len);
    if ((r = fn->vkResetDescriptorPool(s->d->dev, s->dpool, 0)) != VK_SUCCESS)
        return vk_fail("vkResetDescriptorPool", r, err, err_len);
    const VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    if ((r = fn->vkBeginCommandBuffer(s->cb, &bi)) != VK_SUCCESS)
        return vk_fail("vkBeginCommandBuffer", r, err, err_len);
    /* what earlier submissions wrote (staged uploads, the last step) is what this step reads */
    const VkMemoryBarrier mb = {
        .sType         = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    fn->vkCmdPipelineBarrier(s->cb,
                             VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    s->n         = 0;
    s->recording = true;
    return HEARTH_OK;
}

enum hearth_status vk_seq_dispatch(struct vk_seq *s, struct vk_pipe *p, struct vk_buf *const *bufs,
                                   const void *push, const uint32_t groups[3], char *err,
                                   size_t err_len)
{
    struct vk_dev *d        = s->d;
    const struct vk_fns *fn = &d->fn;
    if (!s->recording)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: %s dispatched outside begin/run",
                    p->name);
    if (s->n == VK_SEQ_MAX)
        return fail(HEARTH_EFULL, err, err_len, "vulkan: a sequence holds at most %d dispatches",
                    VK_SEQ_MAX);
    for (int i = 0; i < 3; i++)
        if (groups[i] == 0 || groups[i] > d->max_groups[i])
            return fail(HEARTH_ERANGE, err, err_len,
                        "vulkan: %s: %u workgroups along %c (the device takes 1..%u)", p->name,
                        groups[i], "xyz"[i], d -> max_groups[i]);
    const VkDescriptorSetAllocateInfo ai = {
        .sType              = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool     = s->dpool,
        .descriptorSetCount = 1,
        .pSetLayouts        = &p->dsl,
    };
    VkDescriptorSet set;
    VkResult r = fn->vkAllocateDescriptorSets(d->dev, &ai, &set);
    if (r != VK_SUCCESS)
        return vk_fail("vkAllocateDescriptorSets", r, err, err_len);
    VkDescriptorBufferInfo info[VK_MAX_BUFS];
    VkWriteDescriptorSet wr[VK_MAX_BUFS];
    for (uint32_t i = 0; i < p->n_bufs; i++) {
        if (bufs[i]->d != d)
            return fail(HEARTH_EINVAL, err, err_len,
                        "vulkan: %s: buffer %u belongs to another device", p->name, i);
        info[i] = (VkDescriptorBufferInfo){.buffer = bufs[i]->buf, .range = VK_WHOLE_SIZE};
        wr[i]   = (VkWriteDescriptorSet){
              .sType           = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
              .dstSet          = set,
              .dstBinding      = i,
              .descriptorCount = 1,
              .descriptorType  = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
              .pBufferInfo     = &info[i],
        };
    }
    fn->vkUpdateDescriptorSets(d->dev, p->n_bufs, wr, 0, NULL);
    /* the previous dispatch's writes (or an upload's) are what this one reads */
    if (s->n > 0) {
        const VkMemoryBarrier mb = {
            .sType         = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
        };
        fn->vkCmdPipelineBarrier(s->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    }
    fn->vkCmdBindPipeline(s->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
    fn->vkCmdBindDescriptorSets(s->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0,
                                NULL);
    if (p->push_len)
        fn->vkCmdPushConstants(s->cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_len, push);
    fn->vkCmdDispatch(s->cb, groups[0], groups[1], groups[2]);
    s->n++;
    return HEARTH_OK;
}

enum hearth_status vk_seq_run(struct vk_seq *s, char *err, size_t err_len)
{
    const struct vk_fns *fn = &s->d->fn;
    if (!s->recording)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: a sequence run without begin");
    s->recording = false;
    /* mapped buffers are read by the host once the fence signals: make the writes visible */
    const VkMemoryBarrier mb = {
        .sType         = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT,
    };
    fn->vkCmdPipelineBarrier(s->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb,
                             0, NULL, 0, NULL);
    VkResult r = fn->vkEndCommandBuffer(s->cb);
    if (r != VK_SUCCESS)
        return vk_fail("vkEndCommandBuffer", r, err, err_len);
    return vk_dev_submit(s->d, s->cb, s->fence, err, err_len);
}
