#!/usr/bin/env bash
# Two "machines" on loopback: two acc-launch instances (machine ranks 0 and 1, 2 processes each)
# rendezvous at one port and run acc-selftest as one 4-rank job; both must succeed.
# Usage: two_machines.sh <acc-launch> <acc-selftest>
set -u
launch=$1
selftest=$2
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for machine in 0 1; do
  timeout 240 "$launch" --cpu --num_machines 2 --machine_rank "$machine" --num_processes 4 \
    --main_process_ip 127.0.0.1 --main_process_port "$port" "$selftest" > "$work/machine$machine.log" 2>&1 &
  pids[$machine]=$!
done
status=0
for machine in 0 1; do
  wait "${pids[$machine]}" || { echo "machine $machine failed (exit $?)"; status=1; }
done
for machine in 0 1; do echo "---- machine $machine ----"; cat "$work/machine$machine.log"; done
grep -q "acc-selftest: 4 process(es), MULTI_CPU" "$work/machine0.log" || { echo "rank 0 did not see 4 processes"; status=1; }
grep -q "ok: bf16 training" "$work/machine0.log" || { echo "the self-test did not finish"; status=1; }
exit $status
