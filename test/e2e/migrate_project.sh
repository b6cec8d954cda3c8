#!/usr/bin/env bash
# A CMake project migrated as a user would: acc installed (`cmake --install` of this build), then the
# installed `acc-migrate --in-place .` in the project's folder, no flags, no compile database, no hand
# edits (the tool configures the project to learn its flags and edits its CMakeLists.txt to find and
# link acc). The migrated project is configured with the line acc-migrate printed, which must find
# that install (-Dacc_DIR), and built; the original is built too, and compare_runs.py compares them
# on 1 and 2 processes. The build tree's acc-migrate (the first argument) must say to install first.
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
installed=$work/prefix/bin/acc-migrate
[ -x "$installed" ] || { echo "FAIL: cmake --install $acc_build put no acc-migrate in $work/prefix/bin"; exit 1; }

# The user's command, in the project's folder; its diff and findings are kept for the failure message.
(cd "$work/migrated" && ACC_MIGRATE_CACHE="$acc_build/test/e2e/pch-cache" "$installed" --color=false --in-place .) \
  > "$work/migrate.log" 2>&1 || { echo "FAIL: acc-migrate --in-place . failed:"; cat "$work/migrate.log"; exit 1; }
for edit in 'find_package(acc CONFIG REQUIRED)' 'acc::acc'; do
  grep -rqF "$edit" "$work/migrated" --include=CMakeLists.txt ||
    { echo "FAIL: the migrated CMakeLists.txt files lack '$edit':"; cat "$work/migrate.log"; exit 1; }
done

# The configure line it printed: -Dacc_DIR of the install it runs from.
line=$(sed -n 's/^    \(cmake -S .* -Dacc_DIR=.*\)$/\1/p' "$work/migrate.log")
case $line in
  "cmake -S . -B build -Dacc_DIR=$work/prefix/"*"/cmake/acc -DTorch_DIR=$torch_dir") ;;
  *) echo "FAIL: acc-migrate printed no configure line with -Dacc_DIR=$work/prefix/.../cmake/acc -DTorch_DIR=$torch_dir:"
     cat "$work/migrate.log"; exit 1 ;;
esac

build "$work/original" "$work/original-build" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
# The printed line as printed, with what the user adds for their machine: this build's generator and
# compiler launcher (acc_DIR and Torch_DIR are the line's; no CMAKE_PREFIX_PATH to find either).
(cd "$work/migrated" && eval "$line" -G Ninja "${launcher[@]}") > "$work/migrated-build.log" 2>&1 &&
  cmake --build "$work/migrated/build" >> "$work/migrated-build.log" 2>&1 ||
  { echo "FAIL: configuring and building with '$line':"; tail -40 "$work/migrated-build.log"; exit 1; }

# From acc's build tree there is no package to point at: the line says to install first (flags from
# the original's build, so that no second configure of the project runs).
(cd "$work/original" && ACC_MIGRATE_CACHE="$acc_build/test/e2e/pch-cache" "$migrate" --color=false \
  -p "$work/original-build" .) > "$work/build-tree.log" 2>&1 ||
  { echo "FAIL: the build tree's acc-migrate failed:"; cat "$work/build-tree.log"; exit 1; }
grep -qF "install acc first, \`cmake --install $acc_build --prefix <prefix>\`" "$work/build-tree.log" ||
  { echo "FAIL: the build tree's acc-migrate does not say to install acc first:"; cat "$work/build-tree.log"; exit 1; }

name=$(sed -n 's/^add_executable(\([A-Za-z_0-9-]*\).*/\1/p' "$project"/src/CMakeLists.txt)
"${ACC_PYTHON:-python3}" "$here/compare_runs.py" "$launch" "$work/original-build/src/$name" "$work/migrated/build/src/$name" \
  "$global_batch" "$process_batch" || { echo "--- acc-migrate's output:"; cat "$work/migrate.log"; exit 1; }
echo "migrated project check passed"
