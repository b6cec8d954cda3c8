#!/usr/bin/env bash
# check-packages on a fake machine: a dpkg database of its own (DPKG_ADMINDIR, which dpkg and
# dpkg-query read instead of /var/lib/dpkg), files of fake packages in a folder, a fake build whose
# depfiles (CMakeFiles/d/*.d, as the fuzzer's clang steps write them) say what it read. Nothing is
# installed; the checker runs as it does on a real build, with the real dpkg.
#
# The machine has libtbb-dev, which the lists do not name (OpenCV's dev package brings it): libstdc++
# looks for it with `__has_include(<tbb/tbb.h>)` in bits/c++config.h, so clang's depfiles name
# tbb/tbb.h, and with <execution> GCC reads TBB's headers through pstl/parallel_backend_tbb.h. The
# libstdc++ headers are the compiler's own when it has them (GCC >= 9), else copies of their lines.
#
#   check_optional_reads.sh <scripts/check-packages> optional
#       the build read TBB only because the machine has it: exit 0, reported as optional; --strict
#       fails on it; a project source that guards its include with __has_include is optional too.
#   check_optional_reads.sh <scripts/check-packages> needed
#       on the same machine, a package the build needs and the lists lack (a plain #include, a link,
#       a header no file names) fails, named with its file and fix, and TBB still does not.
set -euo pipefail
check=$1
mode=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sys=$work/sys
mkdir -p "$work/db/info" "$sys/usr/bin" "$sys/usr/lib" "$sys/usr/include/tbb" "$sys/usr/include/oneapi/tbb" \
  "$sys/usr/include/needed" "$work/source" "$work/build/CMakeFiles/d" "$work/build/link-deps" "$work/lists"

# libstdc++'s headers: the compiler's, or the lines of GCC 12's that matter here.
cxx=${CXX:-c++}
deps=$(printf '#include <execution>\n' | "$cxx" -std=c++17 -x c++ -M - 2>/dev/null | tr ' \\' '\n\n' || true)
# As the checker names them: normalized (clang writes /usr/bin/../lib/gcc/...).
cxxconfig=$(grep -m1 '/bits/c++config\.h$' <<<"$deps" | xargs -r realpath -s || true)
backend=$(grep -m1 '/pstl/parallel_backend\.h$' <<<"$deps" | xargs -r realpath -s || true)
backend_tbb=${backend%.h}_tbb.h
if [ -z "$cxxconfig" ] || ! grep -qF '__has_include(<tbb/tbb.h>)' "$cxxconfig" ||
   [ -z "$backend" ] || ! grep -qF '#include <tbb/blocked_range.h>' "$backend_tbb"; then
  echo "($cxx has no libstdc++ parallel backend that looks for TBB: copies of GCC 12's lines stand in)"
  mkdir -p "$sys/usr/include/c++/bits" "$sys/usr/include/c++/pstl"
  cxxconfig=$sys/usr/include/c++/bits/c++config.h
  backend_tbb=$sys/usr/include/c++/pstl/parallel_backend_tbb.h
  printf '#if __has_include(<pstl/pstl_config.h>)\n# ifndef _GLIBCXX_USE_TBB_PAR_BACKEND\n#  define _GLIBCXX_USE_TBB_PAR_BACKEND __has_include(<tbb/tbb.h>)\n# endif\n#endif\n' > "$cxxconfig"
  printf '#include <tbb/blocked_range.h>\n#include <tbb/parallel_for.h>\n' > "$backend_tbb"
fi
echo "libstdc++: $cxxconfig, $backend_tbb"

# The fake packages' files.
ln -s "$(command -v ninja)" "$sys/usr/bin/ninja"
printf '#include "../oneapi/tbb/blocked_range.h"\n' > "$sys/usr/include/tbb/blocked_range.h"
printf '#pragma once\n' > "$sys/usr/include/oneapi/tbb/blocked_range.h"
printf '#include "../oneapi/tbb/blocked_range.h"\n' > "$sys/usr/include/tbb/tbb.h"
printf '#pragma once\n' > "$sys/usr/include/needed/needed.h"
: > "$sys/usr/lib/libtbb.so"

# The fake dpkg database: what is installed, and which files each package owns.
package() {  # name priority [files...]
  local name=$1 prio=$2
  shift 2
  printf 'Package: %s\nStatus: install ok installed\nPriority: %s\nMaintainer: test\nArchitecture: all\nVersion: 1\nDescription: fake\n\n' \
    "$name" "$prio" >> "$work/db/status"
  printf '%s\n' "$@" > "$work/db/info/$name.list"
}
package ninja-build optional "$sys/usr/bin/ninja"
package libstdc++-dev optional "$cxxconfig" "$backend_tbb"
package libtbb-dev optional "$sys/usr/include/tbb/tbb.h" "$sys/usr/include/tbb/blocked_range.h" \
  "$sys/usr/include/oneapi/tbb/blocked_range.h" "$sys/usr/lib/libtbb.so"
package libneeded-dev optional "$sys/usr/include/needed/needed.h"
export DPKG_ADMINDIR=$work/db
dpkg -S "$sys/usr/bin/ninja" > /dev/null 2>&1 ||
  { echo "FAIL: dpkg does not read the fake database (DPKG_ADMINDIR needs dpkg >= 1.20)"; exit 1; }
printf 'ninja-build libstdc++-dev\n' > "$work/lists/build.txt"
printf '# nothing yet\n' > "$work/lists/runtime.txt"

# The fake build: clang's depfile names what __has_include found; GCC with <execution> read TBB.
printf 'rule nothing\n  command = true\nbuild all: phony\n' > "$work/build/build.ninja"
cat > "$work/build/CMakeCache.txt" <<CACHE
CMAKE_HOME_DIRECTORY:INTERNAL=$work/source
CMAKE_MAKE_PROGRAM:FILEPATH=$sys/usr/bin/ninja
CACHE
# An include in a comment block is no include.
printf '/* TBB would be used as\n#include <tbb/tbb.h>\n*/\n#include <cstddef>\n' > "$work/source/fuzz.cpp"
printf '#include <execution>\n' > "$work/source/par.cpp"
depfile() {  # name target files...
  local name=$1 target=$2
  shift 2
  { printf '%s:' "$target"; printf ' \\\n  %s' "$@"; printf '\n'; } > "$work/build/CMakeFiles/d/$name.d"
}
depfile fuzz fuzz/obj/fuzz.o "$work/source/fuzz.cpp" "$cxxconfig" "$sys/usr/include/tbb/tbb.h"
depfile par runtime/obj/par.o "$work/source/par.cpp" "$cxxconfig" "$backend_tbb" \
  "$sys/usr/include/tbb/blocked_range.h" "$sys/usr/include/oneapi/tbb/blocked_range.h"

fail() { echo "FAIL: $*"; echo "--- output:"; cat "$work/out"; exit 1; }
run_check() {  # expected status, then the checker's arguments
  local want=$1 rc=0
  shift
  "$check" --lists "$work/lists" "$@" "$work/build" > "$work/out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || fail "exit $rc, expected $want ($case)"
}
has() { grep -qF -- "$1" "$work/out" || fail "no line with: $1 ($case)"; }
has_not() { ! grep -qF -- "$1" "$work/out" || fail "a line with: $1 ($case)"; }
tbb_optional="check-packages: optional, read because installed: libtbb-dev ($sys/usr/include/tbb/tbb.h, included under __has_include by $cxxconfig; +2 more files); the build does without it"

case $mode in
optional)
  case="libtbb-dev read through libstdc++'s __has_include(<tbb/tbb.h>)"
  run_check 0
  has "$tbb_optional"
  has "check-packages: ok: "
  has_not "FAILED"

  case="the same, --strict"
  run_check 1 --strict
  has "check-packages: FAILED: the build in $work/build reads files from 1 Debian package that"
  has "  libtbb-dev: $sys/usr/include/tbb/tbb.h (+2 more), read by fuzz/obj/fuzz.o; optional ($sys/usr/include/tbb/tbb.h, included under __has_include by $cxxconfig; +2 more files), failed by --strict"
  has "    fix: remove libtbb-dev from this machine (the build does without it), or add it to $work/lists/runtime.txt"

  case="a project source that includes needed/needed.h only when __has_include finds it"
  printf '#if __has_include(<needed/needed.h>)\n#include <needed/needed.h>\n#endif\n' > "$work/source/guarded.cpp"
  depfile guarded runtime/obj/guarded.o "$work/source/guarded.cpp" "$sys/usr/include/needed/needed.h"
  run_check 0
  has "check-packages: optional, read because installed: libneeded-dev ($sys/usr/include/needed/needed.h, included under __has_include by $work/source/guarded.cpp)"
  has "$tbb_optional"
  rm "$work/build/CMakeFiles/d/guarded.d"

  case="GCC alone (no clang depfile names tbb/tbb.h): TBB's headers through pstl/parallel_backend_tbb.h"
  mv "$work/build/CMakeFiles/d/fuzz.d" "$work/fuzz.d"
  run_check 0
  has "check-packages: optional, read because installed: libtbb-dev ($sys/usr/include/tbb/blocked_range.h, included by $backend_tbb only when __has_include(<tbb/tbb.h>) in $cxxconfig finds it; +1 more file)"
  mv "$work/fuzz.d" "$work/build/CMakeFiles/d/fuzz.d"
  echo "optional reads check passed"
  ;;
needed)
  case="a project source that includes needed/needed.h"
  printf '#include <needed/needed.h>\n' > "$work/source/app.cpp"
  depfile app runtime/obj/app.o "$work/source/app.cpp" "$sys/usr/include/needed/needed.h"
  run_check 1
  has "check-packages: FAILED: the build in $work/build reads files from 1 Debian package that"
  has "  libneeded-dev: $sys/usr/include/needed/needed.h, read by runtime/obj/app.o; needed: $work/source/app.cpp includes <needed/needed.h> without __has_include"
  has "    fix: add libneeded-dev to $work/lists/runtime.txt with a comment saying why"
  has "$tbb_optional"
  has_not "  libtbb-dev:"

  case="a header no file names (-include)"
  printf 'int main() {}\n' > "$work/source/app.cpp"
  run_check 1
  has "  libneeded-dev: $sys/usr/include/needed/needed.h, read by runtime/obj/app.o; needed: no header the build read names $sys/usr/include/needed/needed.h"
  has_not "  libtbb-dev:"
  rm "$work/build/CMakeFiles/d/app.d"

  case="a project source that includes tbb/tbb.h without __has_include"
  printf '#include <tbb/tbb.h>\n' > "$work/source/tbb_user.cpp"
  depfile tbb_user runtime/obj/tbb_user.o "$work/source/tbb_user.cpp" "$sys/usr/include/tbb/tbb.h" \
    "$sys/usr/include/oneapi/tbb/blocked_range.h"
  run_check 1
  has "  libtbb-dev: $sys/usr/include/tbb/tbb.h (+2 more), read by fuzz/obj/fuzz.o; needed: $work/source/tbb_user.cpp includes <tbb/tbb.h> without __has_include"
  has "    fix: add libtbb-dev to $work/lists/runtime.txt with a comment saying why"
  has_not "optional, read because installed"
  rm "$work/build/CMakeFiles/d/tbb_user.d"

  case="a link that reads libtbb.so"
  printf 'bin/app: \\\n  %s\n' "$sys/usr/lib/libtbb.so" > "$work/build/link-deps/app.d"
  run_check 1
  has "; needed: the link of bin/app reads $sys/usr/lib/libtbb.so"
  has_not "optional, read because installed"
  echo "needed packages check passed"
  ;;
*)
  echo "usage: $0 <scripts/check-packages> optional|needed" >&2
  exit 2
  ;;
esac
