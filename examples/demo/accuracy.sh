#!/usr/bin/env bash
# The migrated classifier trained on 2 CPU processes, then as one process on the same global batch of
# 64, and the test accuracy of each, side by side. Each run prints its accuracy once, from the main
# process: on 2 processes each scores its half of every test batch and gather_for_metrics gives the
# main process all the predictions and labels (the padding of a short last batch dropped), so the
# figure covers the whole test set exactly once.
# Usage: accuracy.sh <acc-launch> <migrated program>   (run by demo.sh, and by the test demo.accuracy_*)
set -euo pipefail
launch=$(readlink -f "$1")  # absolute: the runs start in a temporary directory
program=$(readlink -f "$2")
if [ -t 1 ]; then bold=$'\e[1m' plain=$'\e[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
work=$(mktemp -d)  # the program saves its model in the current directory
trap 'rm -rf "$work"' EXIT
mkdir "$work/two" "$work/one"

step "3/4  acc-launch --cpu --num_processes 2: each process trains on half of every global batch of 64"
(cd "$work/two" && timeout 300 "$launch" --cpu --num_processes 2 "$program" 32) | tee "$work/two.txt"

step "4/4  the same program as one process, batch 64: the same global batches, for comparison"
(cd "$work/one" && timeout 300 "$launch" --cpu --num_processes 1 "$program" 64) | tee "$work/one.txt"

# The last accuracy line of each run (acc-launch prefixes the main process's lines with [rank0]: ).
last_accuracy() { sed -n 's/^\(\[rank[0-9]*\]: \)\{0,1\}accuracy \([0-9.eE+-]*\)$/\2/p' "$1" | tail -n 1; }
two=$(last_accuracy "$work/two.txt")
one=$(last_accuracy "$work/one.txt")
if [ -z "$two" ] || [ -z "$one" ]; then
  echo "demo: a run printed no accuracy line (2 processes: '${two}', 1 process: '${one}')" >&2
  exit 1
fi
printf '\n%stest accuracy after training, over the whole test set:%s\n' "$bold" "$plain"
printf '  2 processes (predictions gathered with gather_for_metrics): %s\n' "$two"
printf '  1 process   (the same program, the same global batches):    %s\n' "$one"
awk -v two="$two" -v one="$one" 'BEGIN {
  if (two == one)
    print "  the same: DDP averages the gradients of the two halves of each batch, which is the gradient of the whole batch"
  else
    printf "  they differ by %g: each process takes the gradient of its half and the all-reduce averages the two, the same sum in another order of float additions, so the weights differ in the last bits (as the losses above do) and a test sample near the decision boundary can change class\n", (two > one ? two - one : one - two)
}'
