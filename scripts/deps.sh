#!/bin/sh
# deps.sh: installs the Debian (or Ubuntu) packages hearth needs, from the one list below.
#
#   sh scripts/deps.sh          what the build and a first run need
#   sh scripts/deps.sh test     that, and what `make test` needs (then the npm clients the tests run)
#   sh scripts/deps.sh ci       that, and what .ci/run adds (fuzzing, AArch64 under qemu, SIMDe)
#   sh scripts/deps.sh runtime  only what a built hearth needs to run (the container's last stage)
#   sh scripts/deps.sh --list [GROUP]      the packages, one a line, installing nothing
#   sh scripts/deps.sh --markdown          the list as docs/building.md's table
#
# It names what it will install before it does, installs only what is missing (a second run
# changes nothing and asks no network), and needs apt and root. The README, docs/building.md
# and .ci/run all take the list from here.
set -eu

# group, package, why. Groups nest: build < test < ci; runtime stands alone. A package marked "optional" that does not
# install costs the tests that need it (they skip with a message), not the whole set-up.
LIST='build	build-essential	gcc and make
build	pkg-config	finds the Vulkan headers at build time
build	libpcre2-dev	the BPE pre-tokenizer regexes, with Unicode properties
build	libevent-dev	`hearth serve`'"'"'s event loop and HTTP server (evhttp), with its pthreads glue
build	libcjson-dev	JSON for the OpenAI and Anthropic APIs: request parsing and response bodies
build	libcurl4-openssl-dev	`hearth pull` and `-hf`: HTTPS to the Hugging Face Hub, redirects, ranges to resume a download (the headers at build time; `libcurl4` is opened at run time by a pull, so `serve -m` never maps it)
build	libssl-dev	SHA-256 from OpenSSL'"'"'s libcrypto (opened with libcurl): every download is checked against the Hub'"'"'s hash
build	libvulkan-dev	the Vulkan headers the GPU runtime (`src/backend/vk/`) builds against; the loader, `libvulkan1`, is opened at run time, so the binary still starts without it
build	glslc	compiles the compute shaders (`src/backend/vk/shaders/*.comp`) to SPIR-V, embedded in the binary
test	libcmocka-dev	the unit and end-to-end test framework
test	curl	the end-to-end tests drive `hearth serve` with it
test	python3-jinja2	the reference renderer the chat-template tests compare against
test	python3-jsonschema	the validator the schema-to-grammar test checks its cases with
test	python3-yaml	the deployment test reads the Kubernetes manifests of docs/deploy
test	python3-numpy	`make bench` and some tests write random GGUF models with `../shared/tools/mkgguf.py`
test	prometheus	`promtool` lints `/metrics` and checks and unit-tests the alert rules of docs/deploy
test	systemd	`systemd-analyze verify` checks the units of docs/deploy
test	mesa-vulkan-drivers	lavapipe, Mesa'"'"'s Vulkan driver on the CPU: a device for the Vulkan tests on machines without a GPU
test	nodejs	runs the official `openai` and `@anthropic-ai/sdk` npm clients against the server
test	ca-certificates	lets npm reach its registry over HTTPS
test	npm	installs those clients, `ajv` and `playwright-core`, pinned by `tests/e2e/node/package-lock.json`, and the coding agents (Claude Code, Codex, opencode) with the AI SDK and LangChain, pinned by `tests/e2e/agents/package-lock.json`
test	chromium	optional: the chat page'"'"'s test drives it headless through `playwright-core` (needs Node.js 20)
ci	clang	libFuzzer targets and the clang warning check (`make fuzz`)
ci	libclang-rt-dev	clang'"'"'s sanitizer and libFuzzer runtimes
ci	clang-format	`make format-check`: the sources as `.clang-format` lays them out (Debian 12'"'"'s version 14 is the reference)
ci	libsimde-dev	`make avx512-test`: the AVX-512 and AMX kernel tables built on SIMDe'"'"'s portable intrinsics
ci	gcc-aarch64-linux-gnu	optional: `make neon-test` cross-builds the kernel tests for AArch64
ci	libc6-dev-arm64-cross	optional: the AArch64 C library for that build
ci	qemu-user	optional: runs the AArch64 kernel tests on x86
ci	libcmocka-dev:arm64	optional: cmocka for the AArch64 tests (adds the arm64 architecture to dpkg)
runtime	libpcre2-8-0	the pre-tokenizer regexes, linked
runtime	libevent-2.1-7	the HTTP server, linked
runtime	libevent-pthreads-2.1-7	its pthreads glue, linked
runtime	libcjson1	JSON, linked
runtime	libcurl4	opened by `hearth pull` and `-hf`
runtime	ca-certificates	the Hub'"'"'s HTTPS certificates, for `-hf`
runtime	libvulkan1	the Vulkan loader, opened when layers go on a GPU
runtime	curl	the container'"'"'s health check asks `/health` with it'

usage() {
    echo "usage: sh scripts/deps.sh [build|test|ci|runtime] | --list [GROUP] | --markdown" >&2
    exit 2
}

# the groups a request for $1 takes in
groups_of() {
    case $1 in
    build) echo build ;;
    test) echo build test ;;
    ci) echo build test ci ;;
    runtime) echo runtime ;;
    *) usage ;;
    esac
}

# prints "package optional|required" for every package of the groups in $1
select_packages() {
    printf '%s\n' "$LIST" | while IFS='	' read -r group pkg why; do
        for g in $1; do
            if [ "$g" = "$group" ]; then
                case $why in optional:*) echo "$pkg optional" ;; *) echo "$pkg required" ;; esac
            fi
        done
    done
}

want=build
case ${1:-} in
--list)
    select_packages "$(groups_of "${2:-build}")" | cut -d' ' -f1
    exit 0
    ;;
--markdown)
    echo "| package | needed for | why |"
    echo "|---|---|---|"
    printf '%s\n' "$LIST" | while IFS='	' read -r group pkg why; do
        echo "| \`$pkg\` | $group | $why |"
    done
    exit 0
    ;;
'') ;;
build | test | ci | runtime) want=$1 ;;
*) usage ;;
esac

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps.sh: no apt here; install these packages (Debian names) with your system's tools:" >&2
    select_packages "$(groups_of "$want")" | cut -d' ' -f1 | tr '\n' ' ' >&2
    echo >&2
    exit 1
fi

native=$(dpkg --print-architecture)
installed() {
    case $1 in *:*) p=$1 ;; *) p=$1:$native ;; esac
    # an Architecture: all package answers only to its bare name
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null ||
        dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

required=""
optional=""
for line in $(select_packages "$(groups_of "$want")" | tr ' ' '='); do
    pkg=${line%=*}
    kind=${line#*=}
    installed "$pkg" && continue
    if [ "$kind" = optional ]; then optional="$optional $pkg"; else required="$required $pkg"; fi
done
# Node.js from another source (its nodejs conflicts with Debian's npm) serves as well
if command -v npm >/dev/null 2>&1; then
    kept=""
    for pkg in $required; do
        case $pkg in nodejs | npm) ;; *) kept="$kept $pkg" ;; esac
    done
    required=$kept
fi

if [ -z "$required$optional" ]; then
    echo "deps.sh: every package for '$want' is installed"
else
    if [ "$(id -u)" != 0 ]; then
        echo "deps.sh: installing needs root: sudo sh scripts/deps.sh $want" >&2
        exit 1
    fi
    echo "deps.sh: installing for '$want':$required$optional"
    export DEBIAN_FRONTEND=noninteractive
    added=0
    case $optional in *:arm64*)
        if ! dpkg --print-foreign-architectures | grep -qx arm64; then
            dpkg --add-architecture arm64
            added=1
        fi
        ;;
    esac
    if ! apt-get update -qq; then
        # a mirror without arm64 costs the AArch64 tests, not the set-up
        [ "$added" = 1 ] || exit 1
        echo "deps.sh: warning: no arm64 packages on this mirror; the AArch64 tests will skip" >&2
        dpkg --remove-architecture arm64
        kept=""
        for pkg in $optional; do
            case $pkg in *:arm64) ;; *) kept="$kept $pkg" ;; esac
        done
        optional=$kept
        apt-get update -qq
    fi
    if [ -n "$required" ]; then
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $required >/dev/null
    fi
    for pkg in $optional; do
        apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null ||
            echo "deps.sh: warning: $pkg did not install; the tests that need it will skip" >&2
    done
fi

# the npm clients the end-to-end tests run, each set pinned by its package-lock.json and
# installed apart: tests/e2e/node (the openai and Anthropic SDKs), tests/e2e/agents (Claude Code,
# Codex, opencode, the AI SDK and LangChain, ~1.3 GB of native binaries). A set that does not
# install (a registry hiccup) costs only the tests that run it: they skip and say why.
# A registry (or a mirror) that lacks some of a package's platform builds (opencode-ai names
# twelve) leaves them out of the lock, and `npm ci` then refuses the lock as out of sync;
# `npm install --no-save` installs the same pinned versions and leaves the lock as it is.
npm_set() {
    dir=$1
    what=$2
    if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
        [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
        npm ci --prefix "$dir" --no-audit --no-fund >/dev/null 2>&1 ||
            npm install --no-save --prefix "$dir" --no-audit --no-fund >/dev/null ||
            echo "deps.sh: warning: npm could not install $dir; $what will skip" >&2
    fi
}
if [ "$want" = test ] || [ "$want" = ci ]; then
    here=$(dirname "$0")/..
    npm_set "$here/tests/e2e/node" "the tests that run the npm clients"
    npm_set "$here/tests/e2e/agents" "the coding-agent tests (test_coding_agents)"
fi
