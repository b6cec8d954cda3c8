#!/usr/bin/env bash
# Two machines made of network namespaces (netns_machines.sh), one acc-launch on each (machine ranks 0
# and 1, 2 processes each, one 4-rank job), rendezvous at machine 0's bridge address. No interface
# variable is set: the ranks must find the interface the other machine reaches by themselves, although
# the host name resolves to 127.0.0.1 (as /etc/hosts has it here and on Debian). Both must succeed.
#
# Usage: netns_two_machines.sh [--gloo_socket_ifname] ACC_LAUNCH PROGRAM [PATTERN]
#   PROGRAM  acc-selftest or acc_cluster_trainer (run with --epochs 2), or any program with PATTERN
#   PATTERN  an extended regular expression machine 0's output must match; default: acc-selftest's
#            or acc_cluster_trainer's success line for 4 processes, after the program's name
#   --gloo_socket_ifname  export GLOO_SOCKET_IFNAME=eth0 (the machines' interface) on both machines,
#            to check the harness without the interface choice of the runtime
# Exit: 0 pass, 1 fail, 77 skip (this machine cannot create network namespaces).
set -u
here=$(cd "$(dirname "$0")" && pwd)

set_ifname=0
if [[ ${1:-} == --gloo_socket_ifname ]]; then set_ifname=1; shift; fi
if [[ $# -lt 2 || $# -gt 3 ]]; then
  sed -n 's/^# Usage: /usage: /p' "$0" >&2
  exit 1
fi
launch=$1
program=$2
pattern=${3:-}
if [[ -z $pattern ]]; then
  case $(basename "$program") in
    acc-selftest*) pattern='acc-selftest: 4 process\(es\), MULTI_CPU' ;;
    acc_cluster_trainer*) pattern='cluster_trainer: 4 process\(es\), launcher [^,]+, job [^,]+, done' ;;
    *) echo "no expected output known for $(basename "$program"): give PATTERN" >&2; exit 1 ;;
  esac
fi
program_args=()
[[ $(basename "$program") == acc_cluster_trainer* ]] && program_args=(--epochs 2)

# Nothing from the caller's environment chooses the interface or the rendezvous.
unset GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME TP_SOCKET_IFNAME GLOO_DEVICE_TRANSPORT \
  MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK ACC_STORE_SECRET
while read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(SLURM_|OMPI_|PMI_|PMIX_|ACCELERATE_)')
((set_ifname)) && export GLOO_SOCKET_IFNAME=eth0

# shellcheck source=netns_machines.sh
. "$here/netns_machines.sh"
work=$(mktemp -d)
machines_at_exit 'rm -rf "$work"'
start=$(date +%s.%N)
machines_start 2 || { echo "FAIL: the machines do not work"; exit 1; }

limit=120  # seconds each acc-launch may run
port=29500  # each machine has its own network stack: no other test can hold this port there
for machine in 0 1; do
  on_machine "$machine" timeout -k 5 "$limit" "$launch" --cpu --num_machines 2 --machine_rank "$machine" \
    --num_processes 4 --main_process_ip "$(machine_addr 0)" --main_process_port "$port" \
    "$program" "${program_args[@]}" > "$work/machine$machine.log" 2>&1 &
  pids[machine]=$!
done
# A failed machine ends the test 20 s later: the other one may wait for its peers until Gloo's timeout.
machines_wait_jobs 20 "${pids[@]}"
status=0
for machine in 0 1; do
  rc=${JOB_RC[machine]}
  if ((JOB_STOPPED[machine])); then
    echo "FAIL: machine $machine's acc-launch was still running 20 s after the other machine failed; stopped (exit $rc)"
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
if ((status != 0)); then
  for machine in 0 1; do echo "---- machine $machine ($(machine_addr "$machine")) ----"; cat "$work/machine$machine.log"; done
  machines_describe
fi
echo "$( ((status == 0)) && echo PASS || echo FAIL ): two machines, $(basename "$program"), GLOO_SOCKET_IFNAME $( ((set_ifname)) && echo "=eth0" || echo unset), $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
exit $status
