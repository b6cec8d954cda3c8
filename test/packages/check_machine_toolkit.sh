#!/usr/bin/env bash
# check-packages on a fake build that found the machine's CUDA toolkit outside /usr/local/cuda*:
# its compiler as a wrapper script in another folder (this machine's image has
# /usr/local/bin/nvcc = `exec /usr/local/cuda-13.0/bin/nvcc`, which CMake finds when
# /usr/local/cuda/bin is not on PATH, as in CI) and its root where CMake's detection put it.
# Both are the machine's, reported and not failed; any other file outside dpkg still fails.
# Usage: check_machine_toolkit.sh <scripts/check-packages>
set -euo pipefail
check=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/source" "$work/build/CMakeFiles/3.25.1" "$work/toolkit/bin" "$work/toolkit/lib" "$work/machine-bin"
printf '#!/bin/sh\nexec %s/toolkit/bin/nvcc "$@"\n' "$work" > "$work/machine-bin/nvcc"
touch "$work/toolkit/bin/nvcc" "$work/toolkit/lib/libcudart.so" "$work/machine-bin/by-hand"
chmod +x "$work/machine-bin/nvcc"
printf 'set(CMAKE_CUDA_COMPILER_TOOLKIT_ROOT "%s/toolkit")\n' "$work" > "$work/build/CMakeFiles/3.25.1/CMakeCUDACompiler.cmake"
printf 'rule nothing\n  command = true\nbuild all: phony\n' > "$work/build/build.ninja"
cat > "$work/build/CMakeCache.txt" <<CACHE
CMAKE_HOME_DIRECTORY:INTERNAL=$work/source
CMAKE_MAKE_PROGRAM:FILEPATH=$(command -v ninja)
CMAKE_CUDA_COMPILER:FILEPATH=$work/machine-bin/nvcc
CUDA_cudart_LIBRARY:FILEPATH=$work/toolkit/lib/libcudart.so
CACHE

fail() { echo "FAIL: $*"; echo "--- output:"; cat "$work/out"; exit 1; }
rc=0; "$check" "$work/build" > "$work/out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "exit $rc for a build whose only non-Debian files are the machine's CUDA toolkit"
grep -q "2 files of the CUDA toolkit under $work/toolkit, and the CUDA compiler $work/machine-bin/nvcc CMake found outside it" \
  "$work/out" || fail "the toolkit and its compiler wrapper are not reported as the machine's"

echo "SOME_TOOL:FILEPATH=$work/machine-bin/by-hand" >> "$work/build/CMakeCache.txt"
rc=0; "$check" "$work/build" > "$work/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "exit $rc, expected 1, for a file installed by hand next to the CUDA compiler wrapper"
grep -q "FAILED: the build reads 1 file that no Debian package installed" "$work/out" || fail "no FAILED line"
grep -q "  $work/machine-bin/by-hand, read by configure (CMake found SOME_TOOL)" "$work/out" || fail "the file is not named"
echo "machine toolkit check passed"
