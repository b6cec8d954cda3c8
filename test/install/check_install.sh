#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs an outside program against it
# twice: with CMake's find_package(acc) and with pkg-config (Makefile users).
# Usage: check_install.sh <build dir> <source dir of this test>
set -euo pipefail
build=$1
here=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/acc/acc.h"
test -f "$work/prefix/lib/cmake/acc/accConfig.cmake"
test -f "$work/prefix/lib/pkgconfig/acc.pc"

cmake -S "$here/consumer" -B "$work/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  "${launcher[@]}" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
env -u RANK -u WORLD_SIZE "$work/cmake-build/consumer" | tee "$work/out1"
grep -q "consumer ran on cpu with 1 process" "$work/out1"

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
compiler=(g++)
command -v ccache >/dev/null && compiler=(ccache g++)
# shellcheck disable=SC2046
"${compiler[@]}" -O1 "$here/consumer/main.cpp" -o "$work/pkgconfig-consumer" $(pkg-config --cflags --libs acc)
env -u RANK -u WORLD_SIZE "$work/pkgconfig-consumer" | tee "$work/out2"
grep -q "consumer ran on cpu with 1 process" "$work/out2"
echo "install check passed"
