#!/bin/bash
# fit_rss.sh: `hearth fit`'s total against the peak resident set (VmHWM) of
# `hearth serve` with the same options, after one request that fills a
# slot's context (a prompt of the context less 48 tokens, by the server's own
# count, and 32 tokens generated). One line per configuration, then the
# worst case; exit 1 when one is off by more than 2% or 4 MiB.
#
#   tests/bench/fit_rss.sh                 # the shared models x the grid below
#   tests/bench/fit_rss.sh MODEL.gguf ...  # these models
#
# Not part of the suite (tests/e2e/test_fit.c checks one configuration);
# the whole grid takes a few minutes. Needs curl and python3.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/hearth}
SHARED=${HEARTH_SHARED:-../shared}
if [ $# -gt 0 ]; then
    models=("$@")
else
    models=()
    for m in stories260K tiny-llama-spm-f16 tiny-llama-spm-q4_0 tiny-llama-spm-q4_k_m \
        tiny-llama-spm-q8_0 tiny-qwen2-bpe-q8_0 tiny-qwen3-bpe-q8_0 tiny-qwen3moe-bpe-q8_0 \
        tiny-gemma3-spm-q8_0 tiny-qwen35moe-bpe-q8_0 tiny-qwen35moe-mtp-bpe-q8_0; do
        models+=("$SHARED/models/$m.gguf")
    done
fi

# one configuration: MODEL NP CTX UB KV -> "diff_mib ok|OFF line"
measure() {
    local m=$1 np=$2 c=$3 ub=$4 kv=$5 log port pid pred hwm
    log=$(mktemp)
    pred=$("$BIN" fit "$m" -c "$c" -np "$np" -ub "$ub" -ctk "$kv" -ctv "$kv" -t 2 --cache-ram 0 \
        --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["total_bytes"])') ||
        return 1
    "$BIN" serve -m "$m" --port 0 -c "$c" -np "$np" -ub "$ub" -b "$ub" -ctk "$kv" -ctv "$kv" \
        -t 2 --cache-ram 0 >"$log" 2>&1 &
    pid=$!
    port=""
    for _ in $(seq 600); do
        port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -1)
        [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$port/health")" = 200 ] && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        echo "$m: the server did not start: $(tail -1 "$log")" >&2
        kill $pid 2>/dev/null
        rm -f "$log"
        return 1
    fi
    python3 - "$port" "$c" <<'PY' || return 1
import json, sys, urllib.request
port, c = int(sys.argv[1]), int(sys.argv[2])
def post(path, body):
    req = urllib.request.Request(f"http://localhost:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=600))
words = [("stone%d" if i % 3 == 0 else "river%d") % (i * 7919 % 100000) for i in range(c)]
n = len(post("/tokenize", {"content": " ".join(words)})["tokens"])
keep = max(1, len(words) * (c - 48) // n)
while len(post("/tokenize", {"content": " ".join(words[:keep])})["tokens"]) > c - 48:
    keep -= max(1, keep // 100)
post("/v1/completions", {"prompt": " ".join(words[:keep]), "max_tokens": 32, "temperature": 0})
PY
    hwm=$(awk '/VmHWM/ {print $2 * 1024}' /proc/$pid/status)
    kill $pid
    wait $pid 2>/dev/null
    rm -f "$log"
    python3 -c "
p, h = $pred, $hwm
d = (h - p) / 1048576
ok = abs(h - p) <= max(0.02 * p, 4 << 20)
print(f'{d:+.2f} {\"ok\" if ok else \"OFF\"} $(basename "$m") np $np ctx $c ub $ub kv $kv: fit {p / 1048576:.2f} MiB, peak RSS {h / 1048576:.2f} MiB ({100 * (h - p) / p:+.2f}%)')"
}

out=$(mktemp)
for m in "${models[@]}"; do
    for c in 512 4096; do for np in 1 4; do for ub in 128 512; do for kv in f16 q8_0; do
        # stories260K's heads of 8 values cannot hold a q8_0 cache
        [ "$kv" = q8_0 ] && [ "$(basename "$m")" = stories260K.gguf ] && continue
        measure "$m" $np $c $ub $kv | tee -a "$out" | cut -d' ' -f2-
    done; done; done; done
done
echo "$(wc -l <"$out") configurations; largest differences (MiB):"
sort -g "$out" | sed -n '1p;$p' | cut -d' ' -f1,3-
off=$(grep -c ' OFF ' "$out")
rm -f "$out"
[ "$off" = 0 ]
