#!/usr/bin/env bash
# A machine lost in the middle of a job: the launchers of a multi-machine job watch each other
# (--heartbeat_timeout), so that a machine that drops off the network ends the job on every machine
# within the timeout, instead of leaving the other ranks blocked in a collective until Gloo's timeout.
#
# Two machines made of network namespaces (netns_machines.sh), one acc-launch on each (2 ranks each, one
# 4-rank job) with --heartbeat_timeout 5, running TRAINER (acc_cluster_trainer) for a long time
# (--epochs 100 --step_sleep_ms 200: about 5 min). 5 s after every rank has started, machine 1's cable
# is pulled (cut_link 1: no reset, no error, its packets just vanish). Then:
#   - machine 0's acc-launch exits non-zero within 5 s + 10 s slack of the cut, its stderr naming
#     machine 1 and machine 1's address;
#   - machine 1's acc-launch (which lost machine 0) exits non-zero within the same bound;
#   - no process is left in either machine (no acc-launch, no rank).
# Prints "noticed lost machine after X s". Before the job, checks its own harness: the machines reach
# each other, cut_link 1 stops the traffic both ways, restore_link 1 brings it back.
#
# Usage: netns_lost_machine.sh [--gloo_socket_ifname] ACC_LAUNCH TRAINER
#   --gloo_socket_ifname  export GLOO_SOCKET_IFNAME=eth0 (the machines' interface) on both machines
# Exit: 0 pass, 1 fail, 77 skip (this machine cannot create network namespaces).
set -u
here=$(cd "$(dirname "$0")" && pwd)

set_ifname=0
if [[ ${1:-} == --gloo_socket_ifname ]]; then set_ifname=1; shift; fi
if [[ $# -ne 2 ]]; then
  sed -n 's/^# Usage: /usage: /p' "$0" >&2
  exit 1
fi
launch=$1
trainer=$2
heartbeat_timeout=5  # seconds, given to both launchers
slack=10             # seconds allowed on top of the heartbeat timeout
bound_ms=$(((heartbeat_timeout + slack) * 1000))
give_up_ms=$((bound_ms + 15000))  # how long after the cut the test waits at most
limit=150            # seconds each acc-launch may run at all (the training alone would last ~5 min)

# shellcheck source=netns_machines.sh
. "$here/netns_machines.sh"
machines_clear_launch_environment
((set_ifname)) && export GLOO_SOCKET_IFNAME=eth0

work=$(mktemp -d)
machines_at_exit 'rm -rf "$work"'
start=$(date +%s.%N)
machines_start 2 || { echo "FAIL: the machines do not work"; exit 1; }
addr0=$(machine_addr 0)
addr1=$(machine_addr 1)

seconds() { awk -v ms="$1" 'BEGIN { printf "%.1f", ms / 1000 }'; }

show_logs() {
  local machine
  for machine in 0 1; do
    echo "---- machine $machine ($(machine_addr "$machine")): acc-launch's stdout ----"
    cat "$work/machine$machine.out"
    echo "---- machine $machine ($(machine_addr "$machine")): acc-launch's stderr ----"
    cat "$work/machine$machine.err"
  done
  machines_describe
}

fail() {
  echo "FAIL: $*"
  show_logs
  echo "FAIL: lost machine, $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
  exit 1
}

# --- The harness: cut_link really stops the traffic, restore_link brings it back. ---
if ! machine_reaches 0 1 || ! machine_reaches 1 0; then fail "harness: machines 0 and 1 do not reach each other"; fi
cut_link 1
machine_reaches 0 1 && fail "harness: machine 0 still reaches machine 1 after cut_link 1"
machine_reaches 1 0 && fail "harness: machine 1 still reaches machine 0 after cut_link 1"
restore_link 1
ok=0
for _ in 1 2 3 4 5; do
  if machine_reaches 0 1 && machine_reaches 1 0; then ok=1; break; fi
  sleep 0.2
done
((ok)) || fail "harness: machines 0 and 1 do not reach each other after restore_link 1"
echo "harness: machines 0 and 1 reach each other; after cut_link 1 neither does; after restore_link 1 both do"

# --- The job. ---
for machine in 0 1; do
  on_machine "$machine" timeout -k 5 "$limit" "$launch" --cpu --num_machines 2 --machine_rank "$machine" \
    --num_processes 4 --main_process_ip "$addr0" --main_process_port 29500 \
    --heartbeat_timeout "$heartbeat_timeout" \
    "$trainer" --epochs 100 --step_sleep_ms 200 > "$work/machine$machine.out" 2> "$work/machine$machine.err" &
  pids[machine]=$!
done

end_ms=()
rcs=()
# Notes the launchers that have ended (sets end_ms[k] and rcs[k]).
poll_launchers() {
  local machine now
  now=$(machines_now_ms)
  for machine in 0 1; do
    [[ -n ${end_ms[machine]:-} ]] && continue
    if kill -0 "${pids[machine]}" 2>/dev/null &&
      [[ $(awk '{ print $3 }' "/proc/${pids[machine]}/stat" 2>/dev/null) != Z ]]; then
      continue
    fi
    wait "${pids[machine]}"
    rcs[machine]=$?
    end_ms[machine]=$now
  done
}

# The ranks of a machine that have started: processes named like the trainer (comm: 15 characters).
trainer_comm=$(basename "$trainer" | cut -c1-15)
ranks_on() {
  local pid count=0
  for pid in $(machine_pids "$1"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$trainer_comm" ]] && count=$((count + 1))
  done
  echo "$count"
}

# Every rank has started (2 on each machine): at most 60 s.
deadline=$(($(machines_now_ms) + 60000))
while :; do
  poll_launchers
  for machine in 0 1; do
    [[ -n ${end_ms[machine]:-} ]] &&
      fail "machine $machine's acc-launch exited with ${rcs[machine]} before every rank had started"
  done
  (($(ranks_on 0) == 2 && $(ranks_on 1) == 2)) && break
  (($(machines_now_ms) > deadline)) && fail "the 4 ranks did not all start within 60 s (machine 0: $(ranks_on 0), machine 1: $(ranks_on 1))"
  sleep 0.1
done
echo "every rank has started; cutting machine 1 off in 5 s"

# 5 s of training, during which nobody may stop.
until_ms=$(($(machines_now_ms) + 5000))
while (($(machines_now_ms) < until_ms)); do
  poll_launchers
  for machine in 0 1; do
    [[ -n ${end_ms[machine]:-} ]] &&
      fail "machine $machine's acc-launch exited with ${rcs[machine]} during training, before the cut"
  done
  sleep 0.1
done

cut_link 1
cut_ms=$(machines_now_ms)
echo "cut machine 1 ($addr1) off the network"

while :; do
  poll_launchers
  [[ -n ${end_ms[0]:-} && -n ${end_ms[1]:-} ]] && break
  (($(machines_now_ms) - cut_ms > give_up_ms)) && break
  sleep 0.1
done

status=0
for machine in 0 1; do
  other=$((1 - machine))
  if [[ -z ${end_ms[machine]:-} ]]; then
    echo "FAIL: machine $machine's acc-launch is still running $(seconds "$give_up_ms") s after the cut (bound: $(seconds "$bound_ms") s)"
    status=1
    continue
  fi
  took=$((end_ms[machine] - cut_ms))
  if ((machine == 0)); then
    echo "noticed lost machine after $(seconds "$took") s (machine 0's acc-launch, exit ${rcs[0]})"
  else
    echo "machine 1's acc-launch (which lost machine 0) exited after $(seconds "$took") s, exit ${rcs[1]}"
  fi
  ((took > bound_ms)) && { echo "FAIL: machine $machine's acc-launch took longer than $(seconds "$bound_ms") s"; status=1; }
  if ((rcs[machine] == 0)); then
    echo "FAIL: machine $machine's acc-launch exited with 0 although machine $other was lost"
    status=1
  elif ((rcs[machine] == 124 || rcs[machine] == 137)); then
    echo "FAIL: machine $machine's acc-launch was ended by its hard timeout ($limit s), exit ${rcs[machine]}"
    status=1
  fi
done
if [[ -n ${end_ms[0]:-} ]]; then
  grep -Eq "machine 1([^0-9]|$)" "$work/machine0.err" ||
    { echo "FAIL: machine 0's acc-launch's stderr does not name machine 1"; status=1; }
  grep -Eq "${addr1//./\\.}([^0-9]|$)" "$work/machine0.err" ||
    { echo "FAIL: machine 0's acc-launch's stderr does not name machine 1's address $addr1"; status=1; }
fi
if [[ -n ${end_ms[1]:-} ]] && ! grep -Eq "machine 0([^0-9]|$)" "$work/machine1.err"; then
  echo "note: machine 1's acc-launch's stderr does not name machine 0"  # not required (yet)
fi

# Nothing may be left on either machine once both launchers have ended (3 s for the last exits).
if [[ -n ${end_ms[0]:-} && -n ${end_ms[1]:-} ]]; then
  deadline=$(($(machines_now_ms) + 3000))
  while :; do
    left=""
    for machine in 0 1; do
      for pid in $(machine_pids "$machine"); do
        left+="  machine $machine: pid $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"$'\n'
      done
    done
    [[ -z $left ]] && break
    (($(machines_now_ms) > deadline)) && break
    sleep 0.1
  done
  if [[ -n $left ]]; then
    echo "FAIL: processes left after both acc-launch exited:"
    printf '%s' "$left"
    status=1
  fi
fi

((status != 0)) && show_logs
echo "$( ((status == 0)) && echo PASS || echo FAIL ): lost machine, $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
exit $status
