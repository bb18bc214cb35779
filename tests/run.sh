#!/bin/sh
# Runs every test binary under BUILD/tests (cmocka, TAP output) and ends with
# one summary line "N passed, N failed, N skipped". Exits non-zero on any
# failure, or when nothing ran at all.
build=${1:-build}
passed=0; failed=0; skipped=0; broken=""
log=$(mktemp)
for t in $(find "$build/tests" -type f -name 'test_*' -perm -u+x | sort); do
    echo "# $t"
    CMOCKA_MESSAGE_OUTPUT=TAP "$t" >"$log" 2>&1
    rc=$?
    cat "$log"
    # cmocka 1.1 writes a skipped test as "not ok N # SKIP name": a skip, not a failure
    p=$(grep -E '^(not )?ok ' "$log" | grep -c '# SKIP'); skipped=$((skipped + p))
    p=$(grep '^ok ' "$log" | grep -vc '# SKIP'); passed=$((passed + p))
    f=$(grep '^not ok ' "$log" | grep -vc '# SKIP'); failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a crash or an abort outside any test: count it, never hide it
        failed=$((failed + 1)); broken="$broken $t(rc=$rc)"
    fi
done
rm -f "$log"
[ -n "$broken" ] && echo "# binaries that failed outside a test:$broken"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ $((passed + skipped)) -gt 0 ]
