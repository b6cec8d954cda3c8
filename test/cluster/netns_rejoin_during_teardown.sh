#!/usr/bin/env bash
# A machine that comes back while machine 0 is still stopping the ranks of the attempt it lost: two
# machines made of network namespaces (netns_machines.sh), 2 ranks each, under --max_restarts 1. The
# ranks of attempt 0 take 3 s to stop after SIGTERM (a program saving its state, say); machine 1's
# acc-launch is killed, and started again the moment machine 0 notices. Machine 1 then hears machine 0's
# old attempt number first: its ranks must end up in machine 0's next attempt, not wait forever in the
# old one (which is what happened before acc-launch followed machine 0's attempt during a run).
# The rank program is a shell script: what is tested is the launchers' agreement, not training.
# Usage: netns_rejoin_during_teardown.sh ACC_LAUNCH
# Exit: 0 pass, 1 fail, 77 skip (this machine cannot create network namespaces).
set -u
here=$(cd "$(dirname "$0")" && pwd)
launch=$(realpath "$1")
# shellcheck source=netns_machines.sh
. "$here/netns_machines.sh"
machines_clear_launch_environment

work=$(mktemp -d)
machines_at_exit 'rm -rf "$work"'
machines_start 2 || { echo "FAIL: the machines do not work"; exit 1; }
addr0=$(machine_addr 0)
now() { machines_now_ms; }
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log "$work/ranks.txt"; do [ -f "$f" ] && { echo "---- $(basename "$f") ----"; cat "$f"; }; done
  exit 1
}

# Attempt 0 runs until stopped and stops slowly; attempt 1 ends after a moment.
cat > "$work/rank.sh" <<EOF
#!/usr/bin/env bash
echo "rank \$RANK attempt \$TORCHELASTIC_RESTART_COUNT" >> "$work/ranks.txt"
if [ "\$TORCHELASTIC_RESTART_COUNT" -ge 1 ]; then sleep 2; exit 0; fi
trap 'sleep 3; exit 143' TERM
while :; do sleep 0.1; done
EOF
chmod +x "$work/rank.sh"

start_machine() {  # start_machine K LOG
  on_machine "$1" timeout -k 5 40 "$launch" --cpu --num_machines 2 --machine_rank "$1" --num_processes 4 \
    --main_process_ip "$addr0" --main_process_port 29500 --heartbeat_timeout 5 --max_restarts 1 \
    "$work/rank.sh" > "$work/$2" 2>&1 &
}
start_machine 0 machine0.log
pid0=$!
start_machine 1 machine1_first.log

deadline=$(($(now) + 30000))
until [ "$(grep -c "attempt 0" "$work/ranks.txt" 2>/dev/null)" = 4 ]; do
  (($(now) > deadline)) && fail "the 4 ranks of attempt 0 did not start within 30 s"
  sleep 0.05
done
for pid in $(machine_pids 1); do  # the launcher itself, not the timeout around it
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = acc-launch ] && kill -KILL "$pid"
done
deadline=$(($(now) + 30000))
until grep -q "machine 1 (.*) closed the connection" "$work/machine0.log"; do
  (($(now) > deadline)) && fail "machine 0 did not notice the lost machine within 30 s"
  sleep 0.02
done
start_machine 1 machine1_second.log  # machine 0's ranks are still stopping
pid1=$!

wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
[ "$rc0" -eq 0 ] || fail "machine 0's acc-launch exited with $rc0"
[ "$rc1" -eq 0 ] || fail "machine 1's second acc-launch exited with $rc1"
for r in 0 1 2 3; do
  grep -q "^rank $r attempt 1$" "$work/ranks.txt" || fail "rank $r never ran in attempt 1"
done
grep -q "machine 0 is in attempt 1, this machine's ranks in 0: starting them again" "$work/machine1_second.log" ||
  fail "machine 1 did not join while machine 0 was in attempt 0 (the race this test sets up did not happen)"
for k in 0 1; do
  left=$(machine_pids "$k")
  [ -z "$left" ] || fail "processes left on machine $k: $left"
done
echo "PASS: machine 1 came back during machine 0's teardown and joined its next attempt (2/2 machines exit 0)"
