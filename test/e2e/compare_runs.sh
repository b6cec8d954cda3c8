#!/usr/bin/env bash
# Runs an example three ways and compares what it prints:
#   original program (one process)  ==  migrated program, one process
#                                   ==  migrated program, acc-launch --cpu -n 2 (rank 0, and rank 1)
# Lines must match word for word; numbers within a relative tolerance (DDP averages the same
# gradients in another order than one process sums them). Every run must exit 0.
# Usage: compare_runs.sh <acc-launch> <original program> <migrated program>
set -euo pipefail
launch=$1 original=$2 migrated=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # programs that save a model write it here
# One process means no launch environment, whatever the caller's shell exports.
single=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT)

"${single[@]}" timeout 120 "$original" > original.out
"${single[@]}" timeout 120 "$migrated" > migrated1.out
timeout 180 "$launch" --cpu -n 2 --main_process_port 0 "$migrated" > launch.out 2> launch.err ||
  { echo "acc-launch -n 2 failed:"; cat launch.out launch.err; exit 1; }
sed -n 's/^\[rank0\]: //p' launch.out > rank0.out
sed -n 's/^\[rank1\]: //p' launch.out > rank1.out

grep -q loss original.out || { echo "the original printed no loss:"; cat original.out; exit 1; }
status=0
for run in migrated1 rank0 rank1; do
  if ! awk -v tol=1e-4 '
      NR == FNR { want[FNR] = $0; n = FNR; next }
      {
        got[FNR] = $0; m = FNR
        split(want[FNR], a, /[ \t]+/); k = split($0, b, /[ \t]+/)
        if (length(a) != k) { bad = FNR; exit }
        for (i = 1; i <= k; i++) {
          if (a[i] == b[i]) continue
          if (a[i] ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ && b[i] ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) {
            d = a[i] - b[i]; if (d < 0) d = -d
            s = a[i] < 0 ? -a[i] : a[i]
            if (d <= tol * (s > 1 ? s : 1)) continue
          }
          bad = FNR; exit
        }
      }
      END {
        if (bad) { printf "line %d: want \"%s\", got \"%s\"\n", bad, want[bad], got[bad]; exit 1 }
        if (m != n) { printf "%d lines, want %d\n", m, n; exit 1 }
      }' original.out "$run.out"; then
    echo "FAIL: $run differs from the original single-process run"
    echo "--- original"; cat original.out; echo "--- $run"; cat "$run.out"
    status=1
  fi
done
[ "$status" = 0 ] && echo "e2e: $(wc -l < original.out) lines agree: original, migrated (1 process), migrated (2 processes, both ranks)"
exit $status
