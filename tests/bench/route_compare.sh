#!/bin/bash
# route_compare.sh: hearth route's policies against pinning, side by side in one run.
# Two replicas of MODEL (one thread each, so each is a machine of its own on a 2-core host)
# behind two routers (affinity, round-robin); `hearth bench` runs two workloads against each
# and against one replica alone (pinning):
#   burst: 16 cold completions at once (512 prompt tokens, 32 out): wall time;
#   agents: 8 sessions, each its own 2,000-token system prompt, 4 turns (32 out):
#           warm-turn TTFT p50.
# Every run salts its prompts, so no run is helped by an earlier one's cache.
#
#   tests/bench/route_compare.sh MODEL.gguf [THREADS] [REPEATS]
#
# Not part of the suite; minutes on a 1B model. Prints one line per run and target.
set -eu
cd "$(dirname "$0")/../.."
M=${1:?usage: route_compare.sh MODEL.gguf [THREADS] [REPEATS]}
T=${2:-1}
N=${3:-1}
B=${BIN:-build/hearth}
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

# starts hearth with its arguments; sets port to the port it listens on (not in a subshell,
# so its pid stays in pids for the cleanup)
start() {
    local log=$dir/$RANDOM.log
    port=""
    "$B" "$@" --port 0 >"$log" 2>&1 &
    pids+=($!)
    for _ in $(seq 600); do
        port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -1)
        if [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$port/health")" = 200 ]; then
            return
        fi
        sleep 0.5
    done
    echo "did not start: $*" >&2
    cat "$log" >&2
    exit 1
}

start serve -m "$M" -t "$T" -np 8 -c 4096 --cache-ram 2G
a=$port
start serve -m "$M" -t "$T" -np 8 -c 4096 --cache-ram 2G
b=$port
start route --upstream "http://127.0.0.1:$a" --upstream "http://127.0.0.1:$b"
aff=$port
start route --upstream "http://127.0.0.1:$a" --upstream "http://127.0.0.1:$b" --policy round-robin
rr=$port

field() { python3 -c "import json,sys; c=json.load(open(sys.argv[1]))[0]; print('%.1f' % c[sys.argv[2]])" "$@"; }

echo "run  target       burst_wall_s  agents_warm_ttft_p50_ms  errors"
for rep in $(seq "$N"); do
    for t in pin:$a round-robin:$rr affinity:$aff; do
        name=${t%%:*}
        port=${t##*:}
        "$B" bench "http://127.0.0.1:$port" --workload completion --requests 16 --concurrency 16 \
            --prompt-tokens 512 --max-tokens 32 --salt --no-progress --json "$dir/burst.json" >/dev/null
        "$B" bench "http://127.0.0.1:$port" --workload conversation --sessions 8 --turns 4 \
            --prompt-tokens 2000 --own-system --max-tokens 32 --concurrency 8 --salt --no-progress \
            --json "$dir/agents.json" >/dev/null
        printf '%-4s %-12s %12s %24s %7s\n' "$rep" "$name" "$(field "$dir/burst.json" duration_s)" \
            "$(field "$dir/agents.json" ttft_warm_ms_p50)" \
            "$(python3 -c "import json; print(json.load(open('$dir/burst.json'))[0]['errors'] + json.load(open('$dir/agents.json'))[0]['errors'])")"
    done
done
