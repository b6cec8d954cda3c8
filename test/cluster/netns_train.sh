#!/usr/bin/env bash
# Machines made of network namespaces (netns_machines.sh), one acc-launch on each (2 processes per
# machine, one job), no interface variable set: the ranks must find the interface the other machines
# reach by themselves, although the host name resolves to 127.0.0.1 (as /etc/hosts has it here and on
# Debian). With --secret the same ACC_STORE_SECRET is exported on every machine: rank 0's gate serves
# the store, and every other rank proves the secret to it across the machines' network, and machine
# 0's launcher must not print its note about a store that admits any client.
# Every acc-launch must succeed.
#
# Usage: netns_train.sh [--gloo_socket_ifname] [--secret] MACHINES ACC_LAUNCH PROGRAM [PATTERN]
#   PROGRAM  acc-selftest or acc_cluster_trainer (run with --epochs 2), or any program with PATTERN
#   PATTERN  an extended regular expression machine 0's output must match; default: acc-selftest's
#            or acc_cluster_trainer's success line for the job's processes, after the program's name
#   --gloo_socket_ifname  export GLOO_SOCKET_IFNAME=eth0 (the machines' interface) on every machine, to
#            check the harness without the runtime's own choice of interface
# Exit: 0 pass, 1 fail, 77 skip (this machine cannot create network namespaces).
set -u
here=$(cd "$(dirname "$0")" && pwd)

set_ifname=0 secret=0
while [[ ${1:-} == --* ]]; do
  case $1 in
    --gloo_socket_ifname) set_ifname=1 ;;
    --secret) secret=1 ;;
    *) break ;;
  esac
  shift
done
if [[ $# -lt 3 || $# -gt 4 ]]; then
  sed -n 's/^# Usage: /usage: /p' "$0" >&2
  exit 1
fi
machines=$1
launch=$2
program=$3
pattern=${4:-}
per_machine=2
world=$((machines * per_machine))
if [[ -z $pattern ]]; then
  case $(basename "$program") in
    acc-selftest*) pattern="acc-selftest: $world process\\(es\\), MULTI_CPU" ;;
    acc_cluster_trainer*) pattern="cluster_trainer: $world process\\(es\\), launcher [^,]+, job [^,]+, done" ;;
    *) echo "no expected output known for $(basename "$program"): give PATTERN" >&2; exit 1 ;;
  esac
fi
program_args=()
[[ $(basename "$program") == acc_cluster_trainer* ]] && program_args=(--epochs 2)

# shellcheck source=netns_machines.sh
. "$here/netns_machines.sh"
machines_clear_launch_environment
((set_ifname)) && export GLOO_SOCKET_IFNAME=eth0
if ((secret)); then
  # The same secret on every machine (the machines inherit this environment), 16 characters or more.
  ACC_STORE_SECRET="netns-test-$$-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
  export ACC_STORE_SECRET
fi

work=$(mktemp -d)
machines_at_exit 'rm -rf "$work"'
start=$(date +%s.%N)
machines_start "$machines" || { echo "FAIL: the machines do not work"; exit 1; }

limit=120  # seconds each acc-launch may run
port=29500  # each machine has its own network stack: no other test can hold this port there
for ((machine = 0; machine < machines; machine++)); do
  on_machine "$machine" timeout -k 5 "$limit" "$launch" --cpu --num_machines "$machines" \
    --machine_rank "$machine" --num_processes "$world" --main_process_ip "$(machine_addr 0)" \
    --main_process_port "$port" "$program" "${program_args[@]}" > "$work/machine$machine.log" 2>&1 &
  pids[machine]=$!
done
# A failed machine ends the test 20 s later: the others may wait for their peers until Gloo's timeout.
machines_wait_jobs 20 "${pids[@]}"
status=0
for ((machine = 0; machine < machines; machine++)); do
  rc=${JOB_RC[machine]}
  if ((JOB_STOPPED[machine])); then
    echo "FAIL: machine $machine's acc-launch was still running 20 s after another machine failed; stopped (exit $rc)"
    status=1
  elif ((rc != 0)); then
    echo "FAIL: machine $machine's acc-launch exited with $rc$( ((rc == 124)) && echo " (timed out after $limit s)")"
    status=1
  fi
done
if ((status == 0)) && ! grep -Eq "$pattern" "$work/machine0.log"; then
  echo "FAIL: machine 0's output does not match '$pattern'"
  status=1
fi
if ((secret)) && grep -q "admits any client" "$work/machine0.log"; then
  echo "FAIL: machine 0's acc-launch did not see ACC_STORE_SECRET (it notes a store that admits any client)"
  status=1
fi
if ((status != 0)); then
  for ((machine = 0; machine < machines; machine++)); do
    echo "---- machine $machine ($(machine_addr "$machine")) ----"
    cat "$work/machine$machine.log"
  done
  machines_describe
fi
echo "$( ((status == 0)) && echo PASS || echo FAIL ): $machines machines$( ((secret)) && echo " with ACC_STORE_SECRET"), $(basename "$program"), GLOO_SOCKET_IFNAME $( ((set_ifname)) && echo "=eth0" || echo unset), $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
exit $status
