#!/usr/bin/env bash
# An installed acc's find_package(acc) against libtorch packages of other versions: another minor
# version is refused at configure time, naming both versions and the fix; another patch version is
# accepted (the libtorch acc was built against is install.find_package_and_pkg_config's). The stand-ins are CMake packages named Torch whose
# TorchConfigVersion.cmake says the version (what find_package(Torch) reads into Torch_VERSION), with
# the imported targets acc::acc names; the check that runs is the installed accConfig.cmake's.
# Usage: check_torch_version.sh <build dir> <source dir of this test> <libtorch version acc was built with>
set -euo pipefail
build=$1
here=$2
built=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"

major=${built%%.*}
rest=${built#*.}
minor=${rest%%.*}
patch=${rest#*.}
patch=${patch%%[!0-9]*}
series=$major.$minor
other_minor=$major.$((minor + 1)).0
other_patch=$major.$minor.$((patch + 1))

# stand_in <version>: a Torch package of that version; prints its Torch_DIR.
stand_in() {
  local dir=$work/torch-$1/share/cmake/Torch
  mkdir -p "$dir"
  printf 'set(PACKAGE_VERSION "%s")\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' "$1" > "$dir/TorchConfigVersion.cmake"
  printf 'foreach(t torch torch_cpu c10)\n  add_library(${t} INTERFACE IMPORTED)\nendforeach()\nset(TORCH_FOUND TRUE)\n' \
    > "$dir/TorchConfig.cmake"
  echo "$dir"
}

# configure <name> [cmake args...]: configures the consumer; the log, one line (CMake wraps messages), in $work/<name>.txt.
configure() {
  local name=$1
  shift
  local rc=0
  cmake -S "$here/torch_version_consumer" -B "$work/build-$name" -DCMAKE_PREFIX_PATH="$work/prefix" "$@" \
    > "$work/$name.log" 2>&1 || rc=$?
  tr -s ' \n' '  ' < "$work/$name.log" > "$work/$name.txt"
  return $rc
}

expect() {  # expect <name> <text>
  grep -qF -- "$2" "$work/$1.txt" || { cat "$work/$1.log"; echo "FAIL ($1): the configure output lacks: $2"; exit 1; }
}

other_dir=$(stand_in "$other_minor")
if configure other-minor -DTorch_DIR="$other_dir"; then
  cat "$work/other-minor.log"
  echo "FAIL: find_package(acc) accepted libtorch $other_minor; acc was built against $built"
  exit 1
fi
expect other-minor "acc was built against libtorch $built, but this project found libtorch $other_minor (Torch_DIR=$other_dir)"
expect other-minor "Fix: point Torch_DIR (or CMAKE_PREFIX_PATH) at libtorch $series.x, the one acc was built against"
expect other-minor "or rebuild and reinstall acc against libtorch $other_minor."
echo "refused libtorch $other_minor, naming both versions and the fix"

patch_dir=$(stand_in "$other_patch")
configure other-patch -DTorch_DIR="$patch_dir" || { cat "$work/other-patch.log"; echo "FAIL: libtorch $other_patch (another patch release) refused"; exit 1; }
expect other-patch "acc found, with libtorch $other_patch"
echo "accepted libtorch $other_patch (same minor version)"

echo "torch version check passed"
