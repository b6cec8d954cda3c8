#!/usr/bin/env bash
# A CMake project migrated as a user would: `acc-migrate --in-place .` in its folder, no flags, no
# compile database, no hand edits (the tool configures the project to learn its flags and edits its
# CMakeLists.txt to find and link acc). The original and the migrated project are then built with
# CMake (acc from a `cmake --install` of this build) and compared by compare_runs.sh on 1 and 2
# processes.
# Usage: migrate_project.sh <acc-migrate> <acc-launch> <acc build dir> <Torch_DIR> <project> <G> <P>
set -euo pipefail
migrate=$1 launch=$2 acc_build=$3 torch_dir=$4 project=$5 global_batch=$6 process_batch=$7
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ccache hits across runs although each run builds in a new temporary folder.
export CCACHE_BASEDIR=$work CCACHE_NOHASHDIR=1
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

build() {  # build <source dir> <build dir> [cmake args]: quiet unless it fails
  local src=$1 out=$2
  shift 2
  cmake -S "$src" -B "$out" -G Ninja -DTorch_DIR="$torch_dir" "${launcher[@]}" "$@" > "$out.log" 2>&1 &&
    cmake --build "$out" >> "$out.log" 2>&1 || { echo "FAIL: building $src:"; tail -40 "$out.log"; exit 1; }
}

cp -R "$project" "$work/original"
cp -R "$project" "$work/migrated"
cmake --install "$acc_build" --prefix "$work/prefix" > "$work/install.log"

# The user's command, in the project's folder; its diff and findings are kept for the failure message.
(cd "$work/migrated" && ACC_MIGRATE_CACHE="$acc_build/test/e2e/pch-cache" "$migrate" --color=false --in-place .) \
  > "$work/migrate.log" 2>&1 || { echo "FAIL: acc-migrate --in-place . failed:"; cat "$work/migrate.log"; exit 1; }
for edit in 'find_package(acc CONFIG REQUIRED)' 'acc::acc'; do
  grep -rqF "$edit" "$work/migrated" --include=CMakeLists.txt ||
    { echo "FAIL: the migrated CMakeLists.txt files lack '$edit':"; cat "$work/migrate.log"; exit 1; }
done

build "$work/original" "$work/original-build"
build "$work/migrated" "$work/migrated-build" -DCMAKE_PREFIX_PATH="$work/prefix"
name=$(sed -n 's/^add_executable(\([A-Za-z_0-9-]*\).*/\1/p' "$project"/src/CMakeLists.txt)
"$here/compare_runs.sh" "$launch" "$work/original-build/src/$name" "$work/migrated-build/src/$name" \
  "$global_batch" "$process_batch" || { echo "--- acc-migrate's output:"; cat "$work/migrate.log"; exit 1; }
echo "migrated project check passed"
