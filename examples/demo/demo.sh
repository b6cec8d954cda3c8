#!/usr/bin/env bash
# `make demo`: acc-migrate's diff for an example program, the migrated program built against libacc,
# then trained on 2 CPU processes with acc-launch and as one process, and the test accuracy of each.
# Usage: examples/demo/demo.sh <build dir>   (acc-migrate, acc-launch and libacc built already)
set -euo pipefail
build=$(cd "$1" && pwd)
program=examples/programs/mnist_classifier.cpp
if [ -t 1 ]; then bold=$'\e[1m' plain=$'\e[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

step "1/4  acc-migrate $program   (a dry run: the diff to review, then what it left to you)"
"$build/bin/acc-migrate" -p "$build" "$program"

step "2/4  build the migrated copy (build/examples/demo/migrated/) against libacc"
cmake --build "$build" --target acc-demo-mnist

"$(dirname "$0")/accuracy.sh" "$build/bin/acc-launch" "$build/bin/acc-demo-mnist"
