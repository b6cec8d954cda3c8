#!/usr/bin/env bash
# A rank that offers Gloo an address the other machine cannot reach fails with an error that names the
# address it offered and the variable to set, and both launchers exit non-zero with nothing left running.
# Two network-namespace machines, each told GLOO_SOCKET_IFNAME=lo: every rank offers 127.0.0.1, as every
# rank did before acc chose the route to MASTER_ADDR (the host name resolves to loopback here).
# Usage: netns_unreachable_address.sh ACC_LAUNCH TRAINER
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
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do echo "---- $(basename "$f") ----"; cat "$f"; done
  exit 1
}
start=$SECONDS
for k in 0 1; do
  ifname=lo
  on_machine "$k" env ${ifname:+GLOO_SOCKET_IFNAME=$ifname} timeout -k 5 90 "$launch" --cpu --num_machines 2 \
    --machine_rank "$k" --num_processes 4 --main_process_ip "$addr0" --main_process_port 29500 \
    --heartbeat_timeout 5 "$trainer" --epochs 1 > "$work/machine$k.log" 2>&1 &
  pids[k]=$!
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
took=$((SECONDS - start))
echo "machine 0 exit $rc0, machine 1 exit $rc1, after $took s"
[ "$rc0" -ne 0 ] && [ "$rc1" -ne 0 ] || fail "both launchers should fail"
[ "$rc0" -ne 124 ] && [ "$rc1" -ne 124 ] || fail "a launcher ran into the test's time limit"
grep -h "offered lo (127.0.0.1, GLOO_SOCKET_IFNAME)" "$work"/*.log | head -1 | grep -q "GLOO_SOCKET_IFNAME=<the interface that reaches them>" ||
  fail "no error names the address offered and the variable to set"
echo "the error: $(grep -h -m1 -A1 "Gloo connects every pair" "$work"/*.log | head -2 | tr '\n' ' ')"
for k in 0 1; do
  left=$(machine_pids "$k")
  [ -z "$left" ] || fail "processes left on machine $k: $left"
done
echo "PASS: an unreachable Gloo address is named with the fix ($took s)"
