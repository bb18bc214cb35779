/*
 * vk_internal.h: internal to src/backend/vk. The Vulkan entry points hearth
 * calls, loaded at run time from the loader (libvulkan.so.1), and the
 * structs the runtime's files share. The loader is opened with dlopen rather
 * than linked, so a hearth built with Vulkan still starts, and says there is
 * no Vulkan, on a machine without it.
 *
 * The process's one instance holds the instance-level entry points; each
 * device copies that table and adds its own device-level ones (the spec makes
 * a pointer valid only for the object it was queried on).
 */
#ifndef HEARTH_VK_INTERNAL_H
#define HEARTH_VK_INTERNAL_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "backend/vk/vk.h"

/* Entry points queried with a NULL instance. */
/* clang-format off */
#define VK_GLOBAL_FNS(X)                                                                     \
    X(vkCreateInstance)                                                                      \
    X(vkEnumerateInstanceVersion)                                                            \
    X(vkEnumerateInstanceExtensionProperties)
/* clang-format on */

/* Entry points queried on the instance (device-level ones go through the loader's dispatch). */
/* clang-format off */
#define VK_INSTANCE_FNS(X)                                                                   \
    X(vkDestroyInstance)                                                                     \
    X(vkEnumeratePhysicalDevices)                                                            \
    X(vkGetPhysicalDeviceProperties)                                                         \
    X(vkGetPhysicalDeviceProperties2)                                                        \
    X(vkGetPhysicalDeviceFeatures2)                                                          \
    X(vkGetPhysicalDeviceMemoryProperties)                                                   \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                              \
    X(vkEnumerateDeviceExtensionProperties)                                                  \
    X(vkCreateDevice)                                                                        \
    X(vkGetDeviceProcAddr)
/* clang-format on */

/* clang-format off */
#define VK_DEVICE_FNS(X)                                                                     \
    X(vkDestroyDevice)                                                                       \
    X(vkGetDeviceQueue)                                                                      \
    X(vkQueueSubmit)                                                                         \
    X(vkDeviceWaitIdle)                                                                      \
    X(vkCreateBuffer)                                                                        \
    X(vkDestroyBuffer)                                                                       \
    X(vkGetBufferMemoryRequirements)                                                         \
    X(vkAllocateMemory)                                                                      \
    X(vkFreeMemory)                                                                          \
    X(vkBindBufferMemory)                                                                    \
    X(vkMapMemory)                                                                           \
    X(vkUnmapMemory)                                                                         \
    X(vkCreateShaderModule)                                                                  \
    X(vkDestroyShaderModule)                                                                 \
    X(vkCreateDescriptorSetLayout)                                                           \
    X(vkDestroyDescriptorSetLayout)                                                          \
    X(vkCreatePipelineLayout)                                                                \
    X(vkDestroyPipelineLayout)                                                               \
    X(vkCreateComputePipelines)                                                              \
    X(vkDestroyPipeline)                                                                     \
    X(vkCreateDescriptorPool)                                                                \
    X(vkDestroyDescriptorPool)                                                               \
    X(vkResetDescriptorPool)                                                                 \
    X(vkAllocateDescriptorSets)                                                              \
    X(vkUpdateDescriptorSets)                                                                \
    X(vkCreateCommandPool)                                                                   \
    X(vkDestroyCommandPool)                                                                  \
    X(vkAllocateCommandBuffers)                                                              \
    X(vkFreeCommandBuffers)                                                                  \
    X(vkResetCommandBuffer)                                                                  \
    X(vkBeginCommandBuffer)                                                                  \
    X(vkEndCommandBuffer)                                                                    \
    X(vkCmdBindPipeline)                                                                     \
    X(vkCmdBindDescriptorSets)                                                               \
    X(vkCmdPushConstants)                                                                    \
    X(vkCmdDispatch)                                                                         \
    X(vkCmdPipelineBarrier)                                                                  \
    X(vkCmdCopyBuffer)                                                                       \
    X(vkCreateFence)                                                                         \
    X(vkDestroyFence)                                                                        \
    X(vkResetFences)                                                                         \
    X(vkWaitForFences)
/* clang-format on */

struct vk_fns {
#define X(name) PFN_##name name;
    VK_GLOBAL_FNS(X) VK_INSTANCE_FNS(X) VK_DEVICE_FNS(X)
#undef X
};

/* The process's instance and its entry points (vk_inst_get). */
struct vk_inst {
    void *lib; /* dlopen handle of the loader */
    VkInstance inst;
    struct vk_fns fn;
};

/*
 * The process's instance (API 1.1 or newer), made at the first call and never destroyed;
 * later calls return it, or the first call's failure again. HEARTH_EUNSUPPORTED with a
 * sentence when there is no loader or no driver: "vulkan: no Vulkan loader (...)".
 * Thread-safe.
 */
enum hearth_status vk_inst_get(const struct vk_inst **out, char *err, size_t err_len);
/* The device-level entry points of dev into fn; false when one is missing. */
bool vk_inst_load_device(struct vk_fns *fn, VkDevice dev, char *err, size_t err_len);

/* A VkResult's name: "VK_ERROR_OUT_OF_DEVICE_MEMORY"; "VkResult -13" for one not listed. */
const char *vk_result_str(VkResult r, char buf[32]);
/*
 * The status a failed call maps to (ENOMEM for the out-of-memory results, EIO otherwise),
 * with "vulkan: CALL failed: VK_ERROR_..." in err.
 */
enum hearth_status vk_fail(const char *call, VkResult r, char *err, size_t err_len);

struct vk_dev {
    const struct vk_inst *vi;
    struct vk_fns fn; /* vi's entry points, with this device's device-level ones */
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool pool; /* for the one-off transfer command buffers of vk_buffer.c */
    VkPhysicalDeviceMemoryProperties mem;
    struct vk_device_info info;
    uint64_t max_alloc;     /* maxMemoryAllocationSize */
    uint64_t max_range;     /* maxStorageBufferRange */
    uint32_t max_groups[3]; /* maxComputeWorkGroupCount */
    bool unified;           /* device-local memory is host-visible and coherent */
    bool force_staging;     /* vk_dev_open's VK_OPEN_STAGING */
    /* compute subgroups shuffle and a 64-invocation workgroup is whole subgroups of 8 or more:
     * the matmul shaders' _sg variants run (off under VK_OPEN_PLAIN) */
    bool subgroup_shuffle;
    /* the device lists VK_KHR_shader_integer_dot_product (enabled with the feature) */
    bool ext_dot;
    /* shaderIntegerDotProduct is enabled and the mul_dot_* shaders are built: decode matmuls of
     * Q8_0 and Q4_0 weights take activations as Q8_0 blocks and sum them as integers (vk_idot.c) */
    bool int_dot;
    struct vk_pipe *pipes; /* the pipelines vk_pipe_get made, a list; freed at close */
    struct vk_buf *gelu;   /* vk_op_gelu's table of 65536 halves, made at its first use */
};

/* Whether the build compiled shader name (vk_shaders.h): the Makefile leaves some out. */
bool vk_shader_built(const char *name);

/* Resets fence, submits cb (ended) on d's queue and waits on fence until it has run. */
enum hearth_status vk_dev_submit(struct vk_dev *d, VkCommandBuffer cb, VkFence fence, char *err,
                                 size_t err_len);
/* Frees d's pipelines (vk_pipeline.c), at vk_dev_close. */
void vk_dev_pipes_free(struct vk_dev *d);

struct vk_buf {
    struct vk_dev *d;
    VkBuffer buf;
    VkDeviceMemory mem;
    size_t len; /* bytes as asked (the buffer rounds up to a multiple of 4) */
    void *map;  /* persistent mapping when the memory is host-visible and not staged */
};

struct vk_pipe {
    struct vk_pipe *next; /* the device's list */
    const char *name;     /* the shader's, static */
    uint32_t n_bufs;      /* bindings 0..n_bufs-1, each a storage buffer */
    uint32_t push_len;    /* push-constant bytes */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipe;
};

struct vk_seq {
    struct vk_dev *d;
    VkDescriptorPool dpool; /* VK_SEQ_MAX sets of up to VK_MAX_BUFS buffers */
    VkCommandBuffer cb;
    VkFence fence;
    uint32_t n; /* dispatches recorded since begin */
    bool recording;
};

/* Workgroups along x before rows spill into y: maxComputeWorkGroupCount's guaranteed minimum. */
#define VK_GROUPS_X 65535u

/* n rows as an x by y grid of one workgroup per row (row = y * groups[0] + x). */
void vk_row_grid(uint32_t n, uint32_t groups[3]);
/*
 * Whether buffer b holds need bytes (what operation op reads or writes as `what`), which the
 * shaders address with 32-bit offsets: HEARTH_ERANGE with a sentence if not.
 */
enum hearth_status vk_check_len(const char *op, const char *what, const struct vk_buf *b,
                                uint64_t need, char *err, size_t err_len);

/*
 * y[t][row0 + r] = W[r] x[t] for the n_rows rows of w (all of vk_op_matmul's weight, or one
 * part of a split one), y n_out wide: vk_op_matmul's checks and dispatch.
 */
enum hearth_status vk_mul_dispatch(struct vk_seq *s, enum dtype t, struct vk_buf *w, uint32_t row0,
                                   uint32_t n_rows, struct vk_buf *x, struct vk_buf *y,
                                   uint32_t n_in, uint32_t n_out, uint32_t n_tok, char *err,
                                   size_t err_len);

/* Part i (< vk_weight_parts) of w: its buffer, the weight's row at its row 0, its rows. */
struct vk_buf *vk_weight_part(const struct vk_weight *w, uint32_t i, uint32_t *row0,
                              uint32_t *n_rows);
/* w's element type, elements per row and rows (all parts together). */
void vk_weight_shape(const struct vk_weight *w, enum dtype *type, uint32_t *n_in, uint32_t *n_rows);

#endif
