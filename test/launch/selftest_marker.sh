#!/usr/bin/env bash
# acc-selftest's local_main_process_first check writes a marker file in $TMPDIR. Another user who
# can guess its name must not be able to make it write through a planted symlink: symlinks to a
# victim file are planted under every name the old scheme (acc-selftest-<pid>-<port>) would use for
# the next few hundred pids, and the victim must come out unchanged while the self-test passes.
# Usage: selftest_marker.sh <acc-test> <acc-selftest>
set -u
acc_test=$1
selftest=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/tmp"
echo precious > "$work/victim"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# One process plants them all, so that planting uses up no pid of the window.
python3 - "$work" "$port" <<'PY'
import os, sys
work, port = sys.argv[1], sys.argv[2]
last = int(open("/proc/sys/kernel/ns_last_pid").read())
for pid in range(last + 1, last + 600):
    os.symlink(f"{work}/victim", f"{work}/tmp/acc-selftest-{pid}-{port}")
PY
TMPDIR="$work/tmp" timeout 120 "$acc_test" --cpu --num_processes 2 --main_process_port "$port" \
  --program "$selftest" > "$work/log" 2>&1
status=$?
cat "$work/log"
if [ "$(cat "$work/victim")" != precious ]; then
  echo "FAIL: the self-test wrote through a planted symlink: the victim now holds '$(cat "$work/victim")'"
  exit 1
fi
[ $status -eq 0 ] || { echo "FAIL: acc-test exited $status"; exit 1; }
leftover=$(find "$work/tmp" -name 'acc-selftest-*' ! -type l | wc -l)
[ "$leftover" -eq 0 ] || { echo "FAIL: $leftover marker file(s) left in TMPDIR"; exit 1; }
echo "PASS: no planted symlink followed, no marker left"
