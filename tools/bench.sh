#!/bin/sh
# make bench: generate the 1B-class random model of ../shared/reference/perf.md
# (TinyLlama's shape) in q4_0 and q8_0, then run bench-engine with 2 threads.
# Models are written once into bench/ (about 1.7 GB) and reused.
set -eu
bin=${1:-build/hearth}
shared=${HEARTH_SHARED:-../shared}
mkgguf=$shared/tools/mkgguf.py
vocab=$shared/vocab/ggml-vocab-llama-spm.gguf
if [ ! -f "$mkgguf" ] || [ ! -f "$vocab" ]; then
    echo "bench: needs $mkgguf and $vocab (set HEARTH_SHARED)" >&2
    exit 1
fi
mkdir -p bench
for t in ${BENCH_TYPES:-q4_0 q8_0}; do
    out=bench/bench-1b-$t.gguf
    if [ ! -f "$out" ]; then
        echo "bench: writing $out"
        /usr/bin/python3 "$mkgguf" --vocab-from "$vocab" --arch llama --dim 2048 --layers 22 \
            --heads 32 --kv-heads 4 --ffn 5632 --ctx 4096 --type "$t" --name bench-1b --seed 7 \
            "$out.tmp"
        mv "$out.tmp" "$out"
    fi
    echo "== $out"
    "$bin" bench-engine -m "$out" -t "${BENCH_THREADS:-2}" -p 512 -n 128 -r "${BENCH_REPS:-1}"
done
