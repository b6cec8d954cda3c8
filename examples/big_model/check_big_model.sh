#!/bin/sh
# CTest examples.big_model: runs acc-demo-big-model twice in a fresh directory. The first run writes
# the checkpoint and checks the dispatched model against the model that wrote it; the second loads
# the existing checkpoint. Each must print a device map with modules on both cpu and disk and the
# generated tokens (the same both times); a bad flag must exit 2 with a one-line error.
# usage: check_big_model.sh PATH/TO/acc-demo-big-model
set -u
program=$1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1

fail() {
  echo "FAIL: $*"
  exit 1
}

tokens=""
for run in first second; do
  out=$("$program" --checkpoint ckpt --tokens 4 2>&1)
  status=$?
  echo "--- $run run"
  echo "$out"
  [ "$status" -eq 0 ] || fail "$run run exited with $status"
  echo "$out" | grep -q -- ' -> cpu$' || fail "$run run: no module on cpu in the device map"
  echo "$out" | grep -q -- ' -> disk$' || fail "$run run: no module on disk in the device map"
  generated=$(echo "$out" | sed -n 's/^generated: \([0-9][0-9 ]*[0-9]\)  (.*/\1/p')
  [ "$(echo "$generated" | wc -w)" -eq 4 ] || fail "$run run: no line 'generated: <4 token ids>'"
  [ -z "$tokens" ] || [ "$generated" = "$tokens" ] || fail "the runs generated '$tokens' and '$generated'"
  tokens=$generated
  if [ "$run" = first ]; then
    echo "$out" | grep -q '^same tokens as the in-memory model' || fail "the first run did not check its tokens"
  fi
done

err=$("$program" --no-such-flag 2>&1 >/dev/null)
status=$?
[ "$status" -eq 2 ] || fail "--no-such-flag exited with $status, not 2"
[ "$(echo "$err" | wc -l)" -eq 1 ] || fail "--no-such-flag printed more than one line: $err"
echo "PASS"
