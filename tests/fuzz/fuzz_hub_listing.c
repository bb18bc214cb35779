/*
 * fuzz_hub_listing.c: libFuzzer target for the Hugging Face Hub's file list
 * as hearth pull reads it off the network (hub_listing_parse), what a spec
 * then selects from it (hub_select: every selected path must still be one
 * hub_path_safe accepts, the parts of one model in order) and the cache's
 * copy of it (hub_listing_json, read back the same). The first input byte
 * picks the spec. Seeds: tests/fuzz/corpus/hub_listing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub/hub_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const specs[] = {"o/r",        "o/r:Q4_K_M",
                                        "o/r:q8_0",   "o/r:IQ4_XS",
                                        "o/r/a.gguf", "o/r/Q4_K_M/m-Q4_K_M-00002-of-00003.gguf"};
    if (size < 1)
        return 0;
    struct hub_spec sp;
    if (hub_spec_parse(specs[data[0] % (sizeof specs / sizeof specs[0])], &sp, NULL, 0))
        abort();
    struct hub_listing l = {0};
    if (hub_listing_parse(&l, (const char *)data + 1, size - 1, NULL, 0) == HEARTH_OK) {
        int idx[16], n = 0;
        if (hub_select(&l, &sp, idx, 16, &n, NULL, 0) == HEARTH_OK) {
            for (int i = 0; i < n; i++) {
                int index, count;
                hub_split_of(l.files[idx[i]].path, &index, &count);
                if (!hub_path_safe(l.files[idx[i]].path) ||
                    (n > 1 && (index != i + 1 || count != n)))
                    abort();
            }
        }
        char *js                = hub_listing_json(&l);
        struct hub_listing back = {0};
        if (js && (hub_listing_parse(&back, js, strlen(js), NULL, 0) || back.n != l.n))
            abort();
        for (int i = 0; js && i < l.n; i++)
            if (strcmp(back.files[i].path, l.files[i].path) ||
                back.files[i].size != l.files[i].size ||
                strcmp(back.files[i].sha256, l.files[i].sha256))
                abort();
        free(js);
        hub_listing_free(&back);
    }
    hub_listing_free(&l);
    return 0;
}
