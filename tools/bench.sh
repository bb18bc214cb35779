#!/bin/sh
# make bench: generate the 1B-class random model of ../shared/reference/perf.md
# (TinyLlama's shape) in q4_0, q8_0 and q4_k_m, then run bench-engine with 2
# threads. Q4_K_M is quantized from an f16 file by hearth quantize (the same
# bytes as llama-quantize), as perf.md's was. Models are written once into
# bench/ (about 2.4 GB; the f16 file is removed) and reused.
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
mkmodel() { # TYPE OUT
    /usr/bin/python3 "$mkgguf" --vocab-from "$vocab" --arch llama --dim 2048 --layers 22 \
        --heads 32 --kv-heads 4 --ffn 5632 --ctx 4096 --type "$1" --name bench-1b --seed 7 "$2"
}
for t in ${BENCH_TYPES:-q4_0 q8_0 q4_k_m}; do
    out=bench/bench-1b-$t.gguf
    if [ ! -f "$out" ]; then
        echo "bench: writing $out"
        case $t in
        q4_k_m)
            mkmodel f16 bench/bench-1b-f16.gguf.tmp
            "$bin" quantize -q bench/bench-1b-f16.gguf.tmp "$out.tmp" Q4_K_M
            rm -f bench/bench-1b-f16.gguf.tmp ;;
        *) mkmodel "$t" "$out.tmp" ;;
        esac
        mv "$out.tmp" "$out"
    fi
    echo "== $out"
    "$bin" bench-engine -m "$out" -t "${BENCH_THREADS:-2}" -p 512 -n 128 -r "${BENCH_REPS:-1}"
done
