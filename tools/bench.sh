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
# The dense Qwen3.5 hybrid of the same class (1.33 B parameters: 24 layers, every fourth gated
# attention, the others Gated DeltaNet with 16 value heads of width 128), in q4_0:
# BENCH_QWEN35=0 leaves it out.
[ "${BENCH_QWEN35:-1}" = 0 ] && exit 0
vocab35=$shared/vocab/ggml-vocab-deepseek-coder.gguf
out=bench/bench-qwen35-1b-q4_0.gguf
if [ ! -f "$out" ]; then
    echo "bench: writing $out"
    /usr/bin/python3 "$mkgguf" --vocab-from "$vocab35" --arch qwen35 --dim 2048 --layers 24 \
        --heads 16 --kv-heads 4 --head-dim 128 --ffn 6144 --ssm-state 128 --ctx 4096 --type q4_0 \
        --tied --name bench-qwen35-1b --seed 7 "$out.tmp"
    mv "$out.tmp" "$out"
fi
echo "== $out"
"$bin" bench-engine -m "$out" -t "${BENCH_THREADS:-2}" -p 512 -n 128 -r "${BENCH_REPS:-1}"
