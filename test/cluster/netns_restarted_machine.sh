#!/usr/bin/env bash
# A machine killed mid-training and started again, under --max_restarts: two machines made of network
# namespaces (netns_machines.sh), 2 ranks each, checkpoints after every epoch in a folder both see (as a
# shared file system would be). Machine 1's acc-launch is killed with SIGKILL after the first checkpoint
# (its ranks die with it); machine 0 notices, stops its ranks and waits for the next attempt; the same
# acc-launch command started again on machine 1 joins that attempt (machine 0's restart count), the
# ranks resume from the newest checkpoint, and both machines end with exit 0 and the weights of one
# uninterrupted process. Prints how long machine 0 took to notice and how long the restart took.
# Usage: netns_restarted_machine.sh ACC_LAUNCH TRAINER
# Exit: 0 pass, 1 fail, 77 skip (this machine cannot create network namespaces).
set -u
here=$(cd "$(dirname "$0")" && pwd)
launch=$(realpath "$1")
trainer=$(realpath "$2")
# shellcheck source=netns_machines.sh
. "$here/netns_machines.sh"
machines_clear_launch_environment

work=$(mktemp -d)
machines_at_exit 'rm -rf "$work"'
machines_start 2 || { echo "FAIL: the machines do not work"; exit 1; }
addr0=$(machine_addr 0)
now() { machines_now_ms; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.1f", ms / 1000 }'; }
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do echo "---- $(basename "$f") ----"; cat "$f"; done
  exit 1
}

epochs=5
args=(--weights_out "$work/weights.txt" --checkpoint_dir "$work/ckpt" --epochs "$epochs" --step_sleep_ms 150)
start_machine() {  # start_machine K LOG
  on_machine "$1" timeout -k 5 120 "$launch" --cpu --num_machines 2 --machine_rank "$1" --num_processes 4 \
    --main_process_ip "$addr0" --main_process_port 29500 --heartbeat_timeout 5 --max_restarts 1 \
    "$trainer" "${args[@]}" > "$work/$2" 2>&1 &
}
start_machine 0 machine0.log
pid0=$!
start_machine 1 machine1_first.log
pid1=$!

deadline=$(($(now) + 60000))
until [ -d "$work/ckpt/checkpoints/checkpoint_0" ] && grep -q "epoch 1/$epochs done" "$work/machine0.log"; do
  (($(now) > deadline)) && fail "no first checkpoint within 60 s"
  kill -0 "$pid0" 2>/dev/null || fail "machine 0's acc-launch ended before the first checkpoint"
  sleep 0.1
done
for pid in $(machine_pids 1); do  # the launcher itself, not the timeout around it
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = acc-launch ] && kill -KILL "$pid"
done
killed=$(now)
echo "killed machine 1's acc-launch after the first checkpoint"

deadline=$(($(now) + 30000))
until grep -q "machine 1 (.*) closed the connection\|restarting all ranks" "$work/machine0.log"; do
  (($(now) > deadline)) && fail "machine 0 did not notice within 30 s"
  sleep 0.05
done
noticed=$(now)
echo "machine 0 noticed the lost machine after $(secs $((noticed - killed))) s: $(grep -m1 "machine 1 (\|failed: rank" "$work/machine0.log")"

start_machine 1 machine1_second.log
pid1=$!
restarted=$(now)
deadline=$(($(now) + 60000))
until grep -q "resumed from" "$work/machine0.log"; do
  (($(now) > deadline)) && fail "the job did not resume within 60 s of machine 1's return"
  sleep 0.05
done
echo "the job resumed $(secs $(($(now) - killed))) s after the kill ($(secs $(($(now) - restarted))) s after machine 1 started again): $(grep -m1 "resumed from" "$work/machine0.log")"

wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
[ "$rc0" -eq 0 ] || fail "machine 0's acc-launch exited with $rc0"
[ "$rc1" -eq 0 ] || fail "machine 1's second acc-launch exited with $rc1"
grep -q "cluster_trainer: 4 process(es), launcher env" "$work/machine0.log" || fail "the job did not finish"
"$trainer" --weights_out "$work/one.txt" --epochs "$epochs" > "$work/one_process.log" 2>&1 || fail "the one-process run failed"
python3 "$here/same_weights.py" "$work/weights.txt" "$work/one.txt" --rtol 1e-4 || fail "weights differ from one process's"
for k in 0 1; do
  left=$(machine_pids "$k")
  [ -z "$left" ] || fail "processes left on machine $k: $left"
done
echo "PASS: machine 1 killed and started again; the job completed (2/2 machines exit 0)"
