#!/usr/bin/env bash
# The test of the demo's last steps (accuracy.sh): on 2 processes the migrated classifier prints each
# epoch's accuracy once (the main process's line only, as many lines as the one-process run), and the
# summary shows the last accuracy of each run side by side, said to be the same exactly when they are.
# Usage: check_accuracy.sh <acc-launch> <migrated program>
set -euo pipefail
here=$(dirname "$0")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$here/accuracy.sh" "$1" "$2" > "$out" 2>&1 || { cat "$out"; echo "FAIL: accuracy.sh failed"; exit 1; }
cat "$out"
fail() { echo "FAIL: $*"; exit 1; }

# The sections: 2 processes from "3/4" to "4/4", one process from "4/4" to the summary.
two=$(sed -n '/^== 3\/4/,/^== 4\/4/p' "$out")
one=$(sed -n '/^== 4\/4/,/^test accuracy after training/p' "$out")
two_lines=$(grep -c 'accuracy ' <<<"$two" || true)
one_lines=$(grep -c '^accuracy ' <<<"$one" || true)
[ "$one_lines" -ge 1 ] || fail "the one-process run printed no accuracy"
[ "$two_lines" -eq "$one_lines" ] ||
  fail "2 processes printed $two_lines accuracy lines, one process $one_lines (each epoch's once, from the main process)"
if grep 'accuracy ' <<<"$two" | grep -qv '^\[rank0\]: accuracy '; then fail "an accuracy line not from rank 0"; fi

last_two=$(grep '^\[rank0\]: accuracy ' <<<"$two" | tail -n 1 | awk '{print $3}')
last_one=$(grep '^accuracy ' <<<"$one" | tail -n 1 | awk '{print $2}')
grep -qx "  2 processes (predictions gathered with gather_for_metrics): $last_two" "$out" ||
  fail "the summary does not show the 2-process accuracy $last_two"
grep -qx "  1 process   (the same program, the same global batches):    $last_one" "$out" ||
  fail "the summary does not show the one-process accuracy $last_one"
if awk -v a="$last_two" -v b="$last_one" 'BEGIN { exit !(a == b) }'; then
  grep -q '^  the same: ' "$out" || fail "equal accuracies ($last_two) not said to be the same"
else
  grep -q '^  they differ by ' "$out" || fail "different accuracies ($last_two, $last_one) not said to differ"
fi
echo "demo accuracy check passed"
