#!/usr/bin/env bash
# `make demo`: acc-migrate's diff for an example program, the migrated program built against libacc,
# then trained on 2 CPU processes with acc-launch, and its test accuracy.
# Usage: examples/demo/demo.sh <build dir>   (acc-migrate, acc-launch and libacc built already)
set -euo pipefail
build=$(cd "$1" && pwd)
program=examples/programs/mnist_classifier.cpp
if [ -t 1 ]; then bold=$'\e[1m' plain=$'\e[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

step "1/3  acc-migrate $program   (a dry run: the diff to review, then what it left to you)"
"$build/bin/acc-migrate" -p "$build" "$program"

step "2/3  build the migrated copy (build/examples/demo/migrated/) against libacc"
cmake --build "$build" --target acc-demo-mnist

step "3/3  acc-launch --cpu --num_processes 2: each process trains on half of every batch of 64"
work=$(mktemp -d)  # the program saves its model in the current directory
trap 'rm -rf "$work"' EXIT
out=$work/output.txt
(cd "$work" && "$build/bin/acc-launch" --cpu --num_processes 2 "$build/bin/acc-demo-mnist" 32) | tee "$out"

# acc-migrate gathered the predictions the accuracy counts (gather-for-metrics) and printing is rank 0's
# (print-on-main-process): the last accuracy line is the test accuracy over the whole test set.
awk '/^\[rank[0-9]+\]: accuracy/ { last = $3 }
     END { printf "\ntest accuracy after training on 2 processes: %.4f\n", last }' "$out"
