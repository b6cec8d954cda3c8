#!/bin/sh
# A launcher test leaves nothing in $TMPDIR: the folders temp_dir() made (read-only ones and planted
# links included) are removed when the test process exits, and ACC_KEEP_TEST_DIRS=1 keeps them.
#
# Usage: check_test_dirs_removed.sh TEST_PROGRAM GTEST_FILTER
# Exit: 0 pass, 1 fail.
set -u
program=$1 filter=$2
work=$(mktemp -d)
trap 'chmod -R u+rwx "$work" 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/removed" "$work/kept"
# As /tmp's own folders are: a test that runs a command as another user (setpriv) must reach its files.
chmod 755 "$work" "$work/removed" "$work/kept"

run() {  # run TMPDIR [VAR=VALUE...]
  dir=$1
  shift
  if ! env TMPDIR="$dir" "$@" "$program" --gtest_filter="$filter" > "$work/log" 2>&1; then
    cat "$work/log"
    echo "FAIL: $filter itself failed"
    exit 1
  fi
  grep -q '\[  PASSED  \] 1 test' "$work/log" || { cat "$work/log"; echo "FAIL: $filter did not run"; exit 1; }
}

run "$work/removed"
left=$(ls -A "$work/removed")
if [ -n "$left" ]; then
  echo "FAIL: $filter left in TMPDIR: $left"
  exit 1
fi
run "$work/kept" ACC_KEEP_TEST_DIRS=1
if [ -z "$(ls -A "$work/kept")" ]; then
  echo "FAIL: with ACC_KEEP_TEST_DIRS=1, $filter kept nothing in TMPDIR"
  exit 1
fi
echo "OK: $filter leaves nothing in TMPDIR, and ACC_KEEP_TEST_DIRS=1 keeps $(ls -A "$work/kept")"
