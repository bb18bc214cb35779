/*
 * cmd_devices.c: `hearth devices`, what hearth can compute on here: the CPU
 * (cores, RAM, the kernel table it picks) and every Vulkan device with its
 * memory and the features kernels may use. No devices, or no Vulkan at all,
 * is an answer (exit 0), said in one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "kernels/kernels.h"
#include "opts.h"
#ifdef HEARTH_VULKAN
#include "backend/vk/vk.h"
#endif

/* devices takes no option: the struct only gives the parser somewhere to write. */
struct devices_args {
    bool unused;
};

static const struct devices_args devices_defaults = {0};

const struct cmd_spec cmd_devices_spec = {
    .name      = "devices",
    .synopsis  = "hearth devices",
    .about     = "Lists the CPU (cores, RAM, kernel table) and every Vulkan device, named vulkan0, "
                 "vulkan1, ... in the loader's order, with its type, driver, Vulkan version, "
                 "device-local memory and compute features. These names are what --device of "
                 "run, perplexity, serve and bench-engine takes.",
    .defaults  = &devices_defaults,
    .args_size = sizeof(struct devices_args),
};

static double gib(unsigned long long bytes)
{
    return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* The CPU's model name from /proc/cpuinfo into buf, or "unknown CPU". */
static void cpu_name(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU");
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp)
        return;
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        const char *colon = strchr(line, ':');
        if (!colon || strncmp(line, "model name", 10))
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        snprintf(buf, len, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    fclose(fp);
}

#ifdef HEARTH_VULKAN
static const char *yes(bool b)
{
    return b ? "yes" : "no";
}

static void list_vulkan(void)
{
    struct vk_device_info *info = NULL;
    int n                       = 0;
    char err[HEARTH_ERR_MAX]    = "";
    if (vk_enumerate(&info, &n, err, sizeof err) != HEARTH_OK) {
        printf("%s\n", err);
        return;
    }
    if (n == 0)
        printf("vulkan: no devices (the loader found a driver but no device)\n");
    for (int i = 0; i < n; i++) {
        const struct vk_device_info *d = &info[i];
        printf("vulkan%d: %s\n", i, d->name);
        printf("    type      %s\n", d->type);
        printf("    driver    %s\n", d->driver);
        printf("    api       %s\n", d->api);
        if (d->local_bytes >= (1u << 30))
            printf("    memory    %.1f GiB device-local\n", gib(d->local_bytes));
        else /* a small device, or HEARTH_VK_MEMORY_MIB's figure */
            printf("    memory    %.1f MiB device-local\n", d->local_bytes / 1048576.0);
        printf("    subgroup  %u\n", d->subgroup_size);
        printf("    features  fp16 %s, int8 %s, 16-bit storage %s, integer dot %s, "
               "cooperative matrix %s\n",
               yes(d->fp16), yes(d->int8), yes(d->storage16), yes(d->int_dot), yes(d->coopmat));
    }
    free(info);
}
#endif

int cmd_devices(int argc, char **argv)
{
    struct devices_args a;
    const enum opts_status st = opts_parse(&cmd_devices_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    char name[256];
    cpu_name(name, sizeof name);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    printf("cpu: %s (%ld cores, %.1f GiB RAM, kernels %s)\n", name, default_threads(),
           pages > 0 && page > 0 ? gib((unsigned long long)pages * (unsigned long long)page) : 0,
           kernels_get()->name);
#ifdef HEARTH_VULKAN
    list_vulkan();
#else
    printf("vulkan: not built into this hearth (building it needs libvulkan-dev and glslc)\n");
#endif
    if (fflush(stdout) != 0) {
        fprintf(stderr, "hearth: cannot write the output\n");
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
