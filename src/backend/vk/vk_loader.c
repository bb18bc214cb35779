/*
 * vk_loader.c: the Vulkan loader opened at run time, the process's one
 * instance with its entry-point table, and the one-line messages every
 * failed call becomes.
 *
 * The instance is made at first use and lives as long as the process, as
 * the loader and the drivers it loads do: creating one loads and queries
 * every installed driver (tens of milliseconds), the devices a model is
 * split across must come from one instance, and lavapipe (Mesa 22.3) leaks
 * 128 bytes per instance it is unloaded with, which LeakSanitizer cannot
 * attribute (the driver's symbols are gone by exit) and so could only be
 * silenced wholesale. With one instance nothing is unloaded and nothing of
 * the driver's is reported, while everything hearth allocates per device
 * is still freed by vk_dev_close and checked.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

/* The loader's soname; the unversioned libvulkan.so is only in the -dev package. */
#define VK_LOADER "libvulkan.so.1"

/* clang-format off */
#define VK_RESULTS(X)                                                                        \
    X(VK_SUCCESS)                                                                            \
    X(VK_NOT_READY)                                                                          \
    X(VK_TIMEOUT)                                                                            \
    X(VK_INCOMPLETE)                                                                         \
    X(VK_ERROR_OUT_OF_HOST_MEMORY)                                                           \
    X(VK_ERROR_OUT_OF_DEVICE_MEMORY)                                                         \
    X(VK_ERROR_INITIALIZATION_FAILED)                                                        \
    X(VK_ERROR_DEVICE_LOST)                                                                  \
    X(VK_ERROR_MEMORY_MAP_FAILED)                                                            \
    X(VK_ERROR_LAYER_NOT_PRESENT)                                                            \
    X(VK_ERROR_EXTENSION_NOT_PRESENT)                                                        \
    X(VK_ERROR_FEATURE_NOT_PRESENT)                                                          \
    X(VK_ERROR_INCOMPATIBLE_DRIVER)                                                          \
    X(VK_ERROR_TOO_MANY_OBJECTS)                                                             \
    X(VK_ERROR_FORMAT_NOT_SUPPORTED)                                                         \
    X(VK_ERROR_FRAGMENTED_POOL)                                                              \
    X(VK_ERROR_UNKNOWN)                                                                      \
    X(VK_ERROR_OUT_OF_POOL_MEMORY)                                                           \
    X(VK_ERROR_INVALID_EXTERNAL_HANDLE)                                                      \
    X(VK_ERROR_FRAGMENTATION)                                                                \
    X(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)                                               \
    X(VK_ERROR_INVALID_SHADER_NV)
/* clang-format on */

const char *vk_result_str(VkResult r, char buf[32])
{
    switch (r) {
#define X(name)                                                                                    \
    case name:                                                                                     \
        return #name;
        VK_RESULTS(X)
#undef X
    default:
        snprintf(buf, 32, "VkResult %d", (int)r);
        return buf;
    }
}

enum hearth_status vk_fail(const char *call, VkResult r, char *err, size_t err_len)
{
    char buf[32];
    set_err(err, err_len, "vulkan: %s failed: %s", call, vk_result_str(r, buf));
    return r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? HEARTH_ENOMEM
                                                                                  : HEARTH_EIO;
}

/* Undoes a failed inst_open. */
static void inst_close(struct vk_inst *vi)
{
    if (vi->inst && vi->fn.vkDestroyInstance)
        vi->fn.vkDestroyInstance(vi->inst, NULL);
    if (vi->lib)
        dlclose(vi->lib);
    memset(vi, 0, sizeof *vi);
}

static enum hearth_status inst_open(struct vk_inst *vi, char *err, size_t err_len)
{
    memset(vi, 0, sizeof *vi);
    vi->lib = dlopen(VK_LOADER, RTLD_NOW | RTLD_LOCAL);
    if (!vi->lib) {
        set_err(err, err_len, "vulkan: no Vulkan loader (%s)", dlerror());
        return HEARTH_EUNSUPPORTED;
    }
    /* dlsym returns an object pointer; POSIX guarantees it converts to a function pointer */
    PFN_vkGetInstanceProcAddr gipa =
        (PFN_vkGetInstanceProcAddr)dlsym(vi->lib, "vkGetInstanceProcAddr");
    if (!gipa) {
        set_err(err, err_len, "vulkan: %s has no vkGetInstanceProcAddr", VK_LOADER);
        inst_close(vi);
        return HEARTH_EUNSUPPORTED;
    }
#define X(name) vi->fn.name = (PFN_##name)gipa(NULL, #name);
    VK_GLOBAL_FNS(X)
#undef X
    uint32_t version = VK_API_VERSION_1_0;
    if (!vi->fn.vkCreateInstance || !vi->fn.vkEnumerateInstanceVersion ||
        vi->fn.vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_1) {
        set_err(err, err_len, "vulkan: the loader offers Vulkan %u.%u; hearth needs 1.1",
                VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
        inst_close(vi);
        return HEARTH_EUNSUPPORTED;
    }
    const VkApplicationInfo app = {
        .sType            = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "hearth",
        .pEngineName      = "hearth",
        .apiVersion       = version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : version,
    };
    const VkInstanceCreateInfo ci = {
        .sType            = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pApplicationInfo = &app,
    };
    VkResult r = vi->fn.vkCreateInstance(&ci, NULL, &vi->inst);
    if (r != VK_SUCCESS) {
        vi->inst = VK_NULL_HANDLE;
        inst_close(vi);
        /* the loader says this when it finds no driver at all */
        if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
            return fail(HEARTH_EUNSUPPORTED, err, err_len,
                        "vulkan: no Vulkan driver (vkCreateInstance failed: "
                        "VK_ERROR_INCOMPATIBLE_DRIVER)");
        return vk_fail("vkCreateInstance", r, err, err_len);
    }
/* clang-format off */
#define X(name)                                                                              \
    if (!(vi->fn.name = (PFN_##name)gipa(vi->inst, #name))) {                                \
        set_err(err, err_len, "vulkan: the loader has no %s", #name);                         \
        inst_close(vi);                                                                   \
        return HEARTH_EUNSUPPORTED;                                                          \
    }
    /* clang-format on */
    VK_INSTANCE_FNS(X)
#undef X
    return HEARTH_OK;
}

bool vk_inst_load_device(struct vk_fns *fn, VkDevice dev, char *err, size_t err_len)
{
/* clang-format off */
#define X(name)                                                                              \
    if (!(fn->name = (PFN_##name)fn->vkGetDeviceProcAddr(dev, #name))) {                    \
        set_err(err, err_len, "vulkan: the device has no %s", #name);                         \
        return false;                                                                        \
    }
    /* clang-format on */
    VK_DEVICE_FNS(X)
#undef X
    return true;
}

static struct vk_inst the_inst;
static enum hearth_status the_status;
static char the_err[HEARTH_ERR_MAX];
static pthread_once_t the_once = PTHREAD_ONCE_INIT;

static void open_once(void)
{
    the_status = inst_open(&the_inst, the_err, sizeof the_err);
}

enum hearth_status vk_inst_get(const struct vk_inst **out, char *err, size_t err_len)
{
    pthread_once(&the_once, open_once);
    *out = the_status == HEARTH_OK ? &the_inst : NULL;
    if (the_status != HEARTH_OK)
        set_err(err, err_len, "%s", the_err);
    return the_status;
}
