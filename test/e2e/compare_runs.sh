#!/usr/bin/env bash
# Runs an example three ways and compares what it prints, line by line:
#   original program, one process, global batch G
#     == migrated program, one process, batch G
#     == migrated program under acc-launch --cpu -n 2, batch P per process, both ranks combined
# With a prepared data loader each rank trains on half of every global batch (P = G/2) and DDP
# averages the gradients, so the original's per-batch mean losses are the mean of the two ranks'
# numbers; a quantity that each rank counts over its own share (e.g. an accuracy divided by the
# whole test set's size) is their sum: name the word before it as a summed word. Words must match
# exactly, numbers within a relative tolerance (DDP adds the same gradients in another order).
# Every run must exit 0.
# Usage: compare_runs.sh <acc-launch> <original> <migrated> <G> <P> [summed word...]
set -euo pipefail
launch=$1 original=$2 migrated=$3 global_batch=$4 process_batch=$5
shift 5
summed="$*"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # programs that save a model write it here
# One process means no launch environment, whatever the caller's shell exports.
single=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT)

"${single[@]}" timeout 120 "$original" "$global_batch" > original.out
"${single[@]}" timeout 120 "$migrated" "$global_batch" > migrated1.out
timeout 180 "$launch" --cpu -n 2 --main_process_port 0 "$migrated" "$process_batch" > launch.out 2> launch.err ||
  { echo "acc-launch -n 2 failed:"; cat launch.out launch.err; exit 1; }
sed -n 's/^\[rank0\]: //p' launch.out > rank0.out
sed -n 's/^\[rank1\]: //p' launch.out > rank1.out

grep -q loss original.out || { echo "the original printed no loss:"; cat original.out; exit 1; }

# compare <name> <output>...: the outputs, combined field by field, equal the original's.
compare() {
  local name=$1
  shift
  if ! awk -v tol=1e-4 -v summed="$summed" -v runs=$# '
      function number(s) { return s ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ }
      BEGIN { split(summed, w, " "); for (i in w) sum_after[w[i]] = 1 }
      FILENAME == ARGV[1] { want[FNR] = $0; n = FNR; next }
      FNR == 1 { run++ }
      {
        if (run == 1) { k[FNR] = split($0, first, /[ \t]+/); for (i = 1; i <= k[FNR]; i++) f[FNR, i] = first[i] }
        if (split($0, b, /[ \t]+/) != k[FNR]) { bad = FNR; why = "fields differ between ranks"; exit }
        for (i = 1; i <= k[FNR]; i++) {
          if (!number(b[i])) { if (b[i] != f[FNR, i]) { bad = FNR; why = "words differ between ranks"; exit } }
          else total[FNR, i] += b[i]
        }
        lines[run] = FNR
      }
      END {
        if (bad) { printf "line %d: %s\n", bad, why; exit 1 }
        for (r = 1; r <= runs; r++) if (lines[r] != n) { printf "run %d printed %d lines, want %d\n", r, lines[r], n; exit 1 }
        for (line = 1; line <= n; line++) {
          m = split(want[line], a, /[ \t]+/)
          if (m != k[line]) { printf "line %d: want \"%s\"\n", line, want[line]; exit 1 }
          for (i = 1; i <= m; i++) {
            got = f[line, i]
            if (number(a[i]) && number(got)) {
              got = total[line, i] / ((i > 1 && f[line, i - 1] in sum_after) ? 1 : runs)
              d = a[i] - got; if (d < 0) d = -d
              s = a[i] < 0 ? -a[i] : a[i]
              if (d <= tol * (s > 1 ? s : 1)) continue
            } else if (a[i] == got) continue
            printf "line %d field %d: want %s, got %s\n", line, i, a[i], got; exit 1
          }
        }
      }' original.out "$@"; then
    echo "FAIL: $name differs from the original single-process run"
    echo "--- original ($global_batch per batch)"; cat original.out
    for out in "$@"; do echo "--- $out"; cat "$out"; done
    return 1
  fi
}
status=0
compare "the migrated program (1 process, batch $global_batch)" migrated1.out || status=1
compare "the migrated program (2 processes, batch $process_batch each)" rank0.out rank1.out || status=1
[ "$status" = 0 ] && echo "e2e: $(wc -l < original.out) lines agree: original (batch $global_batch)," \
  "migrated on 1 process (batch $global_batch), migrated on 2 processes (batch $process_batch each)"
exit $status
