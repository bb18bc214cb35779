/*
 * fuzz_gguf.c: libFuzzer target for the GGUF reader. Opens the input as a
 * buffer and, when it is accepted, reads every key, array element and tensor
 * through the accessors, touching the tensor bytes, so ASan sees any pointer
 * that escapes the buffer. Seeds: tests/fuzz/corpus/gguf (tests/fuzz/mkcorpus.py).
 */
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

static volatile uint64_t sink;

static void touch(const void *p, uint64_t len)
{
    const uint8_t *b = p;
    uint64_t s       = 0;
    if (len) /* first and last byte: enough for ASan to see a range that escapes */
        s += b[0] + b[len - 1];
    sink += s;
}

static const uint8_t vbytes[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file *f;
    char err[HEARTH_ERR_MAX];
    if (gguf_open_buffer(data, size, &f, err, sizeof err) != HEARTH_OK)
        return 0;

    sink += gguf_version(f) + gguf_alignment(f) + gguf_data_offset(f) + gguf_file_size(f);
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        struct gguf_str k = gguf_key(f, i), s;
        enum gguf_vtype et;
        uint64_t n, u;
        int64_t v;
        double d;
        bool b;
        touch(k.ptr, k.len);
        char key[256];
        if (k.len < sizeof key) {
            memcpy(key, k.ptr, k.len);
            key[k.len] = 0;
            if (!memchr(key, 0, k.len) && gguf_find_key(f, key) != i)
                __builtin_trap(); /* keys are unique, so lookup must find this one */
            uint32_t u32;
            float x;
            char buf[64];
            sink += gguf_get_u32(f, key, &u32) + gguf_get_f32(f, key, &x) +
                    gguf_get_bool(f, key, &b) + gguf_get_str(f, key, buf, sizeof buf);
        }
        sink += gguf_kv_type(f, i) + gguf_kv_u64(f, i, &u) + gguf_kv_i64(f, i, &v) +
                gguf_kv_f64(f, i, &d) + gguf_kv_bool(f, i, &b);
        if (gguf_kv_str(f, i, &s))
            touch(s.ptr, s.len);
        if (!gguf_kv_arr(f, i, &et, &n))
            continue;
        if (et < GGUF_VTYPE_COUNT && vbytes[et])
            touch(gguf_arr_data(f, i), n * vbytes[et]);
        for (uint64_t j = 0; j < n && et == GGUF_STR; j++)
            if (gguf_arr_str(f, i, j, &s))
                touch(s.ptr, s.len);
        for (uint64_t j = 0; j < n && et == GGUF_ARR; j++) {
            enum gguf_vtype e2;
            uint64_t n2;
            const void *p;
            if (gguf_arr_arr(f, i, j, &e2, &n2, &p) && p)
                touch(p, n2 * vbytes[e2]);
        }
        sink += gguf_arr_str(f, i, n, &s); /* one past the end: must say no */
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (gguf_find_tensor(f, t->name) != t)
            __builtin_trap();
        touch(t->data, t->size);
        sink += t->n_dims + t->ne[0] + t->type;
    }
    gguf_close(f);
    return 0;
}
