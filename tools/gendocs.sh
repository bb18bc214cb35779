#!/bin/sh
# gendocs.sh: rewrites the generated regions of README.md and docs/*.md. A region is
#   <!-- BEGIN: COMMAND -->
#   ...what COMMAND prints, run from the top of the tree...
#   <!-- END: COMMAND -->
# (the options tables come from `./build/hearth CMD --help-md`, the package table from
# `sh scripts/deps.sh --markdown`). tests/unit/test_opts.c fails when a region is stale.
set -eu
cd "$(dirname "$0")/.."
for f in README.md docs/*.md; do
    grep -q '^<!-- BEGIN: ' "$f" || continue
    awk '
        /^<!-- BEGIN: .* -->$/ {
            print
            cmd = substr($0, 13, length($0) - 16)
            while ((cmd | getline line) > 0) print line
            if (close(cmd) != 0) { print "gendocs: " cmd " failed" > "/dev/stderr"; exit 1 }
            skipping = 1
            next
        }
        skipping && $0 == "<!-- END: " cmd " -->" { skipping = 0 }
        !skipping { print }
    ' "$f" >"$f.tmp"
    if cmp -s "$f" "$f.tmp"; then rm "$f.tmp"; else mv "$f.tmp" "$f" && echo "gendocs: $f"; fi
done
