#!/usr/bin/env bash
# acc as a subproject (add_subdirectory / FetchContent): the parent configures, its program links
# acc::acc (libtorch's targets visible to it), and acc builds libacc alone: no launcher, rewriter,
# tests, benchmarks or examples, and none of acc's global settings (output directories) leak.
# Configure only: building libacc a second time is what the other tests already do.
# Usage: check_subproject.sh <acc source dir>
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/parent"
sed "s|@ACC_SOURCE@|$source_dir|g" "$source_dir/test/install/subproject/CMakeLists.txt.in" > "$work/parent/CMakeLists.txt"
cmake -S "$work/parent" -B "$work/build" -G Ninja > "$work/configure.log" 2>&1 || {
  cat "$work/configure.log"; echo "FAIL: a parent project cannot add_subdirectory(acc)"; exit 1; }
targets=$(ninja -C "$work/build" -t targets all | sed 's/:.*//')
for wanted in consumer acc; do
  grep -qx "$wanted" <<<"$targets" || { echo "FAIL: no target '$wanted' in the parent's build"; exit 1; }
done
for unwanted in acc-launch acc-migrate acc_unit_tests acc_bench_ddp_step acc-demo-train; do
  if grep -qx "$unwanted" <<<"$targets"; then
    echo "FAIL: acc as a subproject builds '$unwanted' (only libacc by default)"; exit 1
  fi
done
if grep -q "CMAKE_RUNTIME_OUTPUT_DIRECTORY" "$work/build/CMakeCache.txt"; then
  echo "FAIL: acc set the parent's output directories"; exit 1
fi
echo "subproject check passed"
