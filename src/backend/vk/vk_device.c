/*
 * vk_device.c: physical devices (what they are, their memory and the
 * features kernels may use) and the logical device hearth computes on: one
 * compute queue, a command pool for transfers. A device and everything made
 * on it belong to one thread at a time.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return "cpu";
    default:
        return "other";
    }
}

static bool has_extension(const VkExtensionProperties *ext, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(ext[i].extensionName, name))
            return true;
    return false;
}

/* HEARTH_VK_MEMORY_MIB in bytes (vk.h), or 0 when unset or not a positive whole number. */
static uint64_t memory_knob(void)
{
    const char *s = getenv("HEARTH_VK_MEMORY_MIB");
    char *end;
    if (!s || !isdigit((unsigned char)*s))
        return 0;
    errno                        = 0;
    const unsigned long long mib = strtoull(s, &end, 10);
    if (errno || *end || mib == 0 || mib > (1ull << 40))
        return 0;
    return (uint64_t)mib << 20;
}

/* Fills info (and the limits d keeps, when d is non-NULL) from physical device pd. */
static enum hearth_status describe(const struct vk_inst *vi, VkPhysicalDevice pd,
                                   struct vk_device_info *info, struct vk_dev *d, char *err,
                                   size_t err_len)
{
    memset(info, 0, sizeof *info);
    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties subgroup = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &driver};
    VkPhysicalDeviceMaintenance3Properties maint3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &subgroup};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &maint3};
    VkPhysicalDeviceProperties base;
    vi->fn.vkGetPhysicalDeviceProperties(pd, &base);
    /* driver properties are core in 1.2 only: do not chain them into an older device's query */
    if (base.apiVersion < VK_API_VERSION_1_2)
        subgroup.pNext = NULL;
    vi->fn.vkGetPhysicalDeviceProperties2(pd, &props);
    const VkPhysicalDeviceProperties *p = &props.properties;

    snprintf(info->name, sizeof info->name, "%s", p->deviceName);
    /* a long driverInfo is cut: the line is for people */
    if (subgroup.pNext && snprintf(info->driver, sizeof info->driver, "%s (%s)", driver.driverName,
                                   driver.driverInfo) >= (int)sizeof info->driver)
        info->driver[sizeof info->driver - 1] = '\0';
    else if (!subgroup.pNext)
        snprintf(info->driver, sizeof info->driver, "driver version 0x%x", p->driverVersion);
    info->type = type_name(p->deviceType);
    snprintf(info->api, sizeof info->api, "%u.%u.%u", VK_API_VERSION_MAJOR(p->apiVersion),
             VK_API_VERSION_MINOR(p->apiVersion), VK_API_VERSION_PATCH(p->apiVersion));
    info->subgroup_size = subgroup.subgroupSize;

    VkPhysicalDeviceMemoryProperties mem;
    vi->fn.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (uint32_t h = 0; h < mem.memoryHeapCount; h++)
        if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            info->local_bytes += mem.memoryHeaps[h].size;
    const uint64_t knob = memory_knob();
    if (knob)
        info->local_bytes = knob;

    uint32_t n_ext = 0;
    VkResult r     = vi->fn.vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, NULL);
    if (r != VK_SUCCESS)
        return vk_fail("vkEnumerateDeviceExtensionProperties", r, err, err_len);
    VkExtensionProperties *ext = calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (!ext)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory listing extensions");
    r = vi->fn.vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, ext);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(ext);
        return vk_fail("vkEnumerateDeviceExtensionProperties", r, err, err_len);
    }
    /* cooperative matrices are newer than the 1.3.239 headers hearth builds against: by name */
    info->coopmat = has_extension(ext, n_ext, "VK_KHR_cooperative_matrix");
    bool ext_f16  = has_extension(ext, n_ext, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    bool ext_dot  = has_extension(ext, n_ext, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    free(ext);

    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDevice16BitStorageFeatures st16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 feat = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                      .pNext = &st16};
    /* chain only the structures the device knows (core version or extension) */
    void **tail = &st16.pNext;
    if (ext_f16 || p->apiVersion >= VK_API_VERSION_1_2) {
        *tail = &f16;
        tail  = &f16.pNext;
    }
    if (ext_dot || p->apiVersion >= VK_API_VERSION_1_3)
        *tail = &dot;
    vi->fn.vkGetPhysicalDeviceFeatures2(pd, &feat);
    info->storage16 = st16.storageBuffer16BitAccess;
    info->fp16      = f16.shaderFloat16;
    info->int8      = f16.shaderInt8;
    info->int_dot   = dot.shaderIntegerDotProduct;

    if (d) {
        d->ext_dot   = ext_dot;
        d->mem       = mem;
        d->max_alloc = maint3.maxMemoryAllocationSize;
        d->max_range = p->limits.maxStorageBufferRange;
        for (int i = 0; i < 3; i++)
            d->max_groups[i] = p->limits.maxComputeWorkGroupCount[i];
        const VkSubgroupFeatureFlags need =
            VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
        d->subgroup_shuffle = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                              (subgroup.supportedOperations & need) == need &&
                              subgroup.subgroupSize >= 8 && subgroup.subgroupSize <= 64;
    }
    return HEARTH_OK;
}

/* The physical devices of vi: a malloc'd array of *n. */
static enum hearth_status physical_devices(const struct vk_inst *vi, VkPhysicalDevice **out,
                                           uint32_t *n, char *err, size_t err_len)
{
    *out       = NULL;
    VkResult r = vi->fn.vkEnumeratePhysicalDevices(vi->inst, n, NULL);
    if (r != VK_SUCCESS)
        return vk_fail("vkEnumeratePhysicalDevices", r, err, err_len);
    if (*n == 0)
        return HEARTH_OK;
    if (!(*out = calloc(*n, sizeof **out)))
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory listing devices");
    r = vi->fn.vkEnumeratePhysicalDevices(vi->inst, n, *out);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(*out);
        *out = NULL;
        return vk_fail("vkEnumeratePhysicalDevices", r, err, err_len);
    }
    return HEARTH_OK;
}

enum hearth_status vk_enumerate(struct vk_device_info **out, int *n, char *err, size_t err_len)
{
    *out = NULL;
    *n   = 0;
    const struct vk_inst *vi;
    enum hearth_status st = vk_inst_get(&vi, err, err_len);
    if (st != HEARTH_OK)
        return st;
    VkPhysicalDevice *pds        = NULL;
    uint32_t n_pd                = 0;
    struct vk_device_info *infos = NULL;
    if ((st = physical_devices(vi, &pds, &n_pd, err, err_len)) != HEARTH_OK || n_pd == 0)
        goto out;
    if (!(infos = calloc(n_pd, sizeof *infos))) {
        st = fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory listing devices");
        goto out;
    }
    for (uint32_t i = 0; i < n_pd; i++)
        if ((st = describe(vi, pds[i], &infos[i], NULL, err, err_len)) != HEARTH_OK)
            goto out;
    *out  = infos;
    *n    = (int)n_pd;
    infos = NULL;
out:
    free(infos);
    free(pds);
    return st;
}

uint64_t vk_device_memory(int index)
{
    struct vk_device_info *info = NULL;
    int n                       = 0;
    char why[256];
    uint64_t bytes = 0;
    if (vk_enumerate(&info, &n, why, sizeof why) == HEARTH_OK && index >= 0 && index < n)
        bytes = info[index].local_bytes;
    free(info);
    return bytes;
}

/* The first queue family with compute, or UINT32_MAX. */
static uint32_t compute_family(const struct vk_inst *vi, VkPhysicalDevice pd)
{
    uint32_t n = 0;
    vi->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties fam[16];
    if (n > 16)
        n = 16;
    vi->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fam);
    for (uint32_t i = 0; i < n; i++)
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            return i;
    return UINT32_MAX;
}

enum hearth_status vk_dev_open(int index, unsigned flags, struct vk_dev **out, char *err,
                               size_t err_len)
{
    *out             = NULL;
    struct vk_dev *d = calloc(1, sizeof *d);
    if (!d)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    enum hearth_status st = vk_inst_get(&d->vi, err, err_len);
    if (st != HEARTH_OK) {
        free(d);
        return st;
    }
    d->fn                 = d->vi->fn;
    VkPhysicalDevice *pds = NULL;
    uint32_t n_pd         = 0;
    if ((st = physical_devices(d->vi, &pds, &n_pd, err, err_len)) != HEARTH_OK)
        goto fail;
    if (index < 0 || (uint32_t)index >= n_pd) {
        st =
            fail(HEARTH_ERANGE, err, err_len, "vulkan: no device vulkan%d (%u found)", index, n_pd);
        goto fail;
    }
    d->phys = pds[index];
    if ((st = describe(d->vi, d->phys, &d->info, d, err, err_len)) != HEARTH_OK)
        goto fail;
    d->queue_family = compute_family(d->vi, d->phys);
    if (d->queue_family == UINT32_MAX) {
        st = fail(HEARTH_EUNSUPPORTED, err, err_len, "vulkan: vulkan%d (%s) has no compute queue",
                  index, d->info.name);
        goto fail;
    }
    const float prio                  = 1.0f;
    const VkDeviceQueueCreateInfo qci = {
        .sType            = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = d->queue_family,
        .queueCount       = 1,
        .pQueuePriorities = &prio,
    };
    const char *no_idot = getenv("HEARTH_VK_IDOT");
    d->int_dot = d->info.int_dot && vk_shader_built("mul_dot_q8_0") && !(flags & VK_OPEN_NO_IDOT) &&
                 !(no_idot && !strcmp(no_idot, "0"));
    /* the shaders' DotProduct capabilities need the feature enabled; the extension too where it
     * is listed (a 1.3 device has the feature in core and may not list it) */
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .shaderIntegerDotProduct = VK_TRUE};
    const char *dot_ext          = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    const VkDeviceCreateInfo dci = {
        .sType                   = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext                   = d->int_dot ? &dot : NULL,
        .queueCreateInfoCount    = 1,
        .pQueueCreateInfos       = &qci,
        .enabledExtensionCount   = d->int_dot && d->ext_dot ? 1 : 0,
        .ppEnabledExtensionNames = &dot_ext,
    };
    VkResult r = d->fn.vkCreateDevice(d->phys, &dci, NULL, &d->dev);
    if (r != VK_SUCCESS) {
        d->dev = VK_NULL_HANDLE;
        st     = vk_fail("vkCreateDevice", r, err, err_len);
        goto fail;
    }
    if (!vk_inst_load_device(&d->fn, d->dev, err, err_len)) {
        st = HEARTH_EUNSUPPORTED;
        goto fail;
    }
    d->fn.vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);
    const VkCommandPoolCreateInfo pci = {
        .sType            = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags            = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = d->queue_family,
    };
    if ((r = d->fn.vkCreateCommandPool(d->dev, &pci, NULL, &d->pool)) != VK_SUCCESS) {
        d->pool = VK_NULL_HANDLE;
        st      = vk_fail("vkCreateCommandPool", r, err, err_len);
        goto fail;
    }
    /* unified: one memory type is device-local, host-visible and coherent (lavapipe, APUs) */
    for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++) {
        const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                           VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        if ((d->mem.memoryTypes[i].propertyFlags & want) == want)
            d->unified = true;
    }
    d->force_staging = flags & VK_OPEN_STAGING;
    if (flags & VK_OPEN_PLAIN)
        d->subgroup_shuffle = false;
    free(pds);
    *out = d;
    return HEARTH_OK;
fail:
    free(pds);
    vk_dev_close(d);
    return st;
}

enum hearth_status vk_dev_submit(struct vk_dev *d, VkCommandBuffer cb, VkFence fence, char *err,
                                 size_t err_len)
{
    const VkSubmitInfo si = {
        .sType              = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers    = &cb,
    };
    VkResult r = d->fn.vkResetFences(d->dev, 1, &fence);
    if (r != VK_SUCCESS)
        return vk_fail("vkResetFences", r, err, err_len);
    if ((r = d->fn.vkQueueSubmit(d->queue, 1, &si, fence)) != VK_SUCCESS)
        return vk_fail("vkQueueSubmit", r, err, err_len);
    /* no timeout: a step that never finishes is a lost device, which the wait reports */
    if ((r = d->fn.vkWaitForFences(d->dev, 1, &fence, VK_TRUE, UINT64_MAX)) != VK_SUCCESS)
        return vk_fail("vkWaitForFences", r, err, err_len);
    return HEARTH_OK;
}

void vk_dev_close(struct vk_dev *d)
{
    if (!d)
        return;
    if (d->dev) {
        d->fn.vkDeviceWaitIdle(d->dev);
        vk_buf_free(d->gelu);
        vk_dev_pipes_free(d);
        if (d->pool)
            d->fn.vkDestroyCommandPool(d->dev, d->pool, NULL);
        d->fn.vkDestroyDevice(d->dev, NULL);
    }
    free(d);
}

const struct vk_device_info *vk_dev_info(const struct vk_dev *d)
{
    return &d->info;
}
