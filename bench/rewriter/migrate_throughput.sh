#!/usr/bin/env bash
# acc-migrate files/s without the PCH cache, with a cold cache (the first run builds it) and a warm
# one, and clang-tidy (one trivial check, same files, same flags) as the baseline tool, then the
# issue's targets (<= 3 s/file cached, >= 5x faster than clang-tidy) as met or missed.
# Usage: migrate_throughput.sh <acc-migrate> <examples/programs> [files=20] [jobs=1]
set -euo pipefail
tool=$1 examples=$2 files=${3:-20} jobs=${4:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The corpus: the example programs, copied under distinct names until there are $files of them.
mkdir -p "$work/corpus"
cp "$examples/template_trainer/trainer.h" "$work/corpus/"
mapfile -t sources < <(ls "$examples"/*.cpp "$examples"/template_trainer/main.cpp)
for ((i = 0; i < files; i++)); do
  cp "${sources[i % ${#sources[@]}]}" "$work/corpus/file_$(printf %02d "$i").cpp"
done

venv=${ACC_VENV:-$HOME/.cache/acc/venv}
torch=$(ls -d "$venv"/lib/python3*/site-packages/torch | head -1)
flags=(-std=c++17 -isystem "$torch/include" -isystem "$torch/include/torch/csrc/api/include")

TIMEFORMAT='%R %U %S'
measure() {  # prints "wall cpu" seconds of the command
  local t
  t=$( { time "$@" > /dev/null 2> "$work/last.err"; } 2>&1 ) || { cat "$work/last.err"; exit 1; }
  awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' <<< "$t"
}
run_migrate() { "$tool" --color=false -j "$jobs" "$@" "$work/corpus" -- "${flags[@]}"; }

read -r nocache_wall nocache_cpu < <(measure run_migrate --no-pch-cache)
read -r cold_wall cold_cpu < <(measure run_migrate --pch-cache="$work/pch")
read -r warm_wall warm_cpu < <(measure run_migrate --pch-cache="$work/pch")
tidy=$(command -v clang-tidy-16 || command -v clang-tidy || true)
if [ -n "$tidy" ]; then
  read -r tidy_wall tidy_cpu < <(measure "$tidy" --quiet -checks=-*,readability-else-after-return \
    "$work"/corpus/*.cpp -- "${flags[@]}")
fi

report() {  # name wall cpu
  awk -v n="$files" -v name="$1" -v w="$2" -v c="$3" -v base="$warm_wall" \
    'BEGIN { printf "%-28s %7.2f s/file wall %7.2f s/file cpu %6.2f files/s   %5.1fx the warm cache\n", name, w / n, c / n, n / w, w / base }'
}
echo "acc-migrate on $files files including <torch/torch.h>, -j $jobs ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
report "no PCH cache" "$nocache_wall" "$nocache_cpu"
report "PCH cache, cold (builds it)" "$cold_wall" "$cold_cpu"
report "PCH cache, warm" "$warm_wall" "$warm_cpu"
[ -n "$tidy" ] && report "clang-tidy, one check" "$tidy_wall" "$tidy_cpu"
awk -v a="$nocache_wall" -v b="$warm_wall" 'BEGIN { printf "speed-up of the warm cache over no cache: %.1fx\n", a / b }'
# The targets of issue 6: at most 3 s per file with the cache, at least 5x faster than clang-tidy.
awk -v n="$files" -v w="$warm_wall" 'BEGIN {
  printf "target: <= 3 s/file with the warm cache: %.2f s/file, %s\n", w / n, (w / n <= 3) ? "met" : "missed" }'
[ -n "$tidy" ] && awk -v t="$tidy_wall" -v w="$warm_wall" 'BEGIN {
  printf "target: >= 5x faster than clang-tidy with one check: %.1fx, %s\n", t / w, (t / w >= 5) ? "met" : "missed" }'
exit 0
