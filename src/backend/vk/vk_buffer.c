/*
 * vk_buffer.c: device-local storage buffers and the copies between them and
 * host memory. Where device-local memory is also host-visible and coherent
 * (lavapipe, integrated GPUs) a buffer stays mapped and a copy is a memcpy;
 * elsewhere a copy goes through a host-visible staging buffer and a transfer
 * command. One VkDeviceMemory per buffer: fine for the tens of tensors a
 * layer has, though a model's hundreds will want one allocation carved up
 * (maxMemoryAllocationCount can be as low as 4096).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

/* A memory type in bits with all of want, or UINT32_MAX. */
static uint32_t memory_type(const struct vk_dev *d, uint32_t bits, VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (d->mem.memoryTypes[i].propertyFlags & want) == want)
            return i;
    return UINT32_MAX;
}

/* A buffer and its own memory, of one of the property sets in want (tried in order). */
static enum hearth_status make(struct vk_dev *d, VkDeviceSize size, VkBufferUsageFlags usage,
                               const VkMemoryPropertyFlags *want, int n_want, VkBuffer *buf,
                               VkDeviceMemory *mem, uint32_t *type, char *err, size_t err_len)
{
    const struct vk_fns *fn      = &d->fn;
    const VkBufferCreateInfo bci = {
        .sType       = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size        = size,
        .usage       = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = fn->vkCreateBuffer(d->dev, &bci, NULL, buf);
    if (r != VK_SUCCESS) {
        *buf = VK_NULL_HANDLE;
        return vk_fail("vkCreateBuffer", r, err, err_len);
    }
    VkMemoryRequirements req;
    fn->vkGetBufferMemoryRequirements(d->dev, *buf, &req);
    *type = UINT32_MAX;
    for (int i = 0; i < n_want && *type == UINT32_MAX; i++)
        *type = memory_type(d, req.memoryTypeBits, want[i]);
    enum hearth_status st;
    if (*type == UINT32_MAX) {
        st = fail(HEARTH_EUNSUPPORTED, err, err_len,
                  "vulkan: %s has no memory type for a buffer of %llu bytes", d->info.name,
                  (unsigned long long)size);
        goto fail;
    }
    const VkMemoryAllocateInfo mai = {
        .sType           = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize  = req.size,
        .memoryTypeIndex = *type,
    };
    if ((r = fn->vkAllocateMemory(d->dev, &mai, NULL, mem)) != VK_SUCCESS) {
        *mem = VK_NULL_HANDLE;
        st   = vk_fail("vkAllocateMemory", r, err, err_len);
        goto fail;
    }
    if ((r = fn->vkBindBufferMemory(d->dev, *buf, *mem, 0)) != VK_SUCCESS) {
        st = vk_fail("vkBindBufferMemory", r, err, err_len);
        fn->vkFreeMemory(d->dev, *mem, NULL);
        *mem = VK_NULL_HANDLE;
        goto fail;
    }
    return HEARTH_OK;
fail:
    fn->vkDestroyBuffer(d->dev, *buf, NULL);
    *buf = VK_NULL_HANDLE;
    return st;
}

enum hearth_status vk_buf_new(struct vk_dev *d, size_t len, struct vk_buf **out, char *err,
                              size_t err_len)
{
    *out = NULL;
    if (len == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: a buffer of 0 bytes");
    /* whole 32-bit words: shaders read packed weights as uint[] */
    const uint64_t size = ((uint64_t)len + 3) & ~(uint64_t)3;
    uint64_t heap       = 0;
    for (uint32_t h = 0; h < d->mem.memoryHeapCount; h++)
        if ((d->mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            d->mem.memoryHeaps[h].size > heap)
            heap = d->mem.memoryHeaps[h].size;
    const char *limit = size > d->max_range   ? "maxStorageBufferRange"
                        : size > d->max_alloc ? "maxMemoryAllocationSize"
                        : size > heap         ? "its largest device-local heap"
                                              : NULL;
    if (limit) {
        uint64_t cap = size > d->max_range   ? d->max_range
                       : size > d->max_alloc ? d->max_alloc
                                             : heap;
        return fail(HEARTH_ENOMEM, err, err_len,
                    "vulkan: a buffer of %llu bytes exceeds %s's %s (%llu bytes)",
                    (unsigned long long)size, d->info.name, limit, (unsigned long long)cap);
    }
    struct vk_buf *b = calloc(1, sizeof *b);
    if (!b)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    b->d                               = d;
    b->len                             = len;
    const VkMemoryPropertyFlags mapped = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                         VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    const VkMemoryPropertyFlags want[2] = {mapped, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT};
    const bool map                      = d->unified && !d->force_staging;
    uint32_t type;
    enum hearth_status st =
        make(d, size,
             VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
             map ? want : want + 1, map ? 2 : 1, &b->buf, &b->mem, &type, err, err_len);
    if (st != HEARTH_OK) {
        free(b);
        return st;
    }
    if (map && (d->mem.memoryTypes[type].propertyFlags & mapped) == mapped) {
        VkResult r = d->fn.vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
        if (r != VK_SUCCESS) {
            vk_buf_free(b);
            return vk_fail("vkMapMemory", r, err, err_len);
        }
    }
    *out = b;
    return HEARTH_OK;
}

void vk_buf_free(struct vk_buf *b)
{
    if (!b)
        return;
    const struct vk_fns *fn = &b->d->fn;
    if (b->map)
        fn->vkUnmapMemory(b->d->dev, b->mem);
    fn->vkDestroyBuffer(b->d->dev, b->buf, NULL);
    fn->vkFreeMemory(b->d->dev, b->mem, NULL);
    free(b);
}

size_t vk_buf_len(const struct vk_buf *b)
{
    return b->len;
}

/*
 * One device-side copy of len bytes, src to dst, in a one-time command
 * buffer, waited for. Earlier sequences' shader writes land before the copy
 * reads or overwrites them.
 */
static enum hearth_status device_copy(struct vk_dev *d, VkBuffer src, size_t src_off, VkBuffer dst,
                                      size_t dst_off, size_t len, char *err, size_t err_len)
{
    const struct vk_fns *fn = &d->fn;
    VkCommandBuffer cb      = VK_NULL_HANDLE;
    VkFence fence           = VK_NULL_HANDLE;
    enum hearth_status st   = HEARTH_OK;
    VkResult r;
    const VkCommandBufferAllocateInfo cai = {
        .sType              = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool        = d->pool,
        .level              = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    if ((r = fn->vkAllocateCommandBuffers(d->dev, &cai, &cb)) != VK_SUCCESS) {
        cb = VK_NULL_HANDLE;
        st = vk_fail("vkAllocateCommandBuffers", r, err, err_len);
        goto out;
    }
    const VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = fn->vkCreateFence(d->dev, &fci, NULL, &fence)) != VK_SUCCESS) {
        fence = VK_NULL_HANDLE;
        st    = vk_fail("vkCreateFence", r, err, err_len);
        goto out;
    }
    const VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    if ((r = fn->vkBeginCommandBuffer(cb, &bi)) != VK_SUCCESS) {
        st = vk_fail("vkBeginCommandBuffer", r, err, err_len);
        goto out;
    }
    const VkMemoryBarrier mb = {
        .sType         = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    fn->vkCmdPipelineBarrier(cb,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    const VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = len};
    fn->vkCmdCopyBuffer(cb, src, dst, 1, &region);
    if ((r = fn->vkEndCommandBuffer(cb)) != VK_SUCCESS) {
        st = vk_fail("vkEndCommandBuffer", r, err, err_len);
        goto out;
    }
    st = vk_dev_submit(d, cb, fence, err, err_len);
out:
    if (fence)
        fn->vkDestroyFence(d->dev, fence, NULL);
    if (cb)
        fn->vkFreeCommandBuffers(d->dev, d->pool, 1, &cb);
    return st;
}

/* One copy through a staging buffer: to the device (up) or from it. */
static enum hearth_status staged(struct vk_buf *b, size_t off, void *host, size_t len, bool up,
                                 char *err, size_t err_len)
{
    struct vk_dev *d                    = b->d;
    const struct vk_fns *fn             = &d->fn;
    const VkMemoryPropertyFlags want[2] = {
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
            VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT};
    VkBuffer sbuf;
    VkDeviceMemory smem;
    uint32_t type;
    void *map = NULL;
    enum hearth_status st =
        make(d, len, up ? VK_BUFFER_USAGE_TRANSFER_SRC_BIT : VK_BUFFER_USAGE_TRANSFER_DST_BIT, want,
             2, &sbuf, &smem, &type, err, err_len);
    if (st != HEARTH_OK)
        return st;
    VkResult r;
    if ((r = fn->vkMapMemory(d->dev, smem, 0, VK_WHOLE_SIZE, 0, &map)) != VK_SUCCESS) {
        map = NULL;
        st  = vk_fail("vkMapMemory", r, err, err_len);
        goto out;
    }
    if (up)
        memcpy(map, host, len);
    st = up ? device_copy(d, sbuf, 0, b->buf, off, len, err, err_len)
            : device_copy(d, b->buf, off, sbuf, 0, len, err, err_len);
    if (st == HEARTH_OK && !up)
        memcpy(host, map, len);
out:
    if (map)
        fn->vkUnmapMemory(d->dev, smem);
    fn->vkDestroyBuffer(d->dev, sbuf, NULL);
    fn->vkFreeMemory(d->dev, smem, NULL);
    return st;
}

static enum hearth_status copy(struct vk_buf *b, size_t off, void *host, size_t len, bool up,
                               char *err, size_t err_len)
{
    if (off > b->len || len > b->len - off)
        return fail(HEARTH_ERANGE, err, err_len,
                    "vulkan: a copy of %zu bytes at offset %zu overruns a buffer of %zu", len, off,
                    b->len);
    if (len == 0)
        return HEARTH_OK;
    if (!b->map)
        return staged(b, off, host, len, up, err, err_len);
    if (up)
        memcpy((char *)b->map + off, host, len);
    else
        memcpy(host, (const char *)b->map + off, len);
    return HEARTH_OK;
}

enum hearth_status vk_buf_upload(struct vk_buf *b, size_t off, const void *src, size_t len,
                                 char *err, size_t err_len)
{
    return copy(b, off, (void *)src, len, true, err, err_len);
}

enum hearth_status vk_buf_download(struct vk_buf *b, size_t off, void *dst, size_t len, char *err,
                                   size_t err_len)
{
    return copy(b, off, dst, len, false, err, err_len);
}

enum hearth_status vk_buf_copy(struct vk_buf *dst, size_t dst_off, struct vk_buf *src,
                               size_t src_off, size_t len, char *err, size_t err_len)
{
    if (dst_off > dst->len || len > dst->len - dst_off || src_off > src->len ||
        len > src->len - src_off)
        return fail(HEARTH_ERANGE, err, err_len,
                    "vulkan: a copy of %zu bytes from offset %zu to %zu overruns a buffer", len,
                    src_off, dst_off);
    if (dst == src && (dst_off < src_off ? src_off - dst_off : dst_off - src_off) < len)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: a copy of %zu bytes within one buffer overlaps itself", len);
    if (len == 0)
        return HEARTH_OK;
    if (dst->map && src->map) {
        memcpy((char *)dst->map + dst_off, (const char *)src->map + src_off, len);
        return HEARTH_OK;
    }
    return device_copy(dst->d, src->buf, src_off, dst->buf, dst_off, len, err, err_len);
}
