#!/usr/bin/env bash
# libacc's load-time check: a program linked against libacc runs with the libtorch acc was built
# against, and ends before main, naming both versions and the fix, when the libtorch that answers
# is of another minor version (a stand-in library, preloaded, that reports <other version>).
# Usage: check_torch_load.sh <probe> <stand-in library> <libtorch version acc was built with> <other version>
set -euo pipefail
probe=$1
stand_in=$2
built=$3
other=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
series=$(echo "$built" | cut -d. -f1,2)

env -u LD_PRELOAD "$probe" > "$work/own.txt" 2>&1 || { cat "$work/own.txt"; echo "FAIL: the probe failed with the libtorch acc was built against"; exit 1; }
grep -qF "libacc runs with libtorch $built (" "$work/own.txt" || { cat "$work/own.txt"; echo "FAIL: the probe did not report libtorch $built"; exit 1; }
cat "$work/own.txt"

rc=0
timeout 60 env LD_PRELOAD="$stand_in" "$probe" > "$work/other.txt" 2>&1 || rc=$?
tr -s '\n' ' ' < "$work/other.txt" > "$work/other.line"
fail() { cat "$work/other.txt"; echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 1 ] || fail "the probe exited with status $rc under libtorch $other (expected 1: refused at load)"
if grep -q "libacc runs with" "$work/other.txt"; then fail "main ran under libtorch $other"; fi
for text in "acc: libacc was built against libtorch $built, but this process loaded libtorch $other ($stand_in)" \
            "Fix: run with libtorch $series.x, the one acc was built against (" \
            "or rebuild and reinstall acc against libtorch $other."; do
  grep -qF -- "$text" "$work/other.line" || fail "the message lacks: $text"
done
cat "$work/other.txt"
echo "torch load check passed"
