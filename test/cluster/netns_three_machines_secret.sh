#!/usr/bin/env bash
# Three machines made of network namespaces (netns_machines.sh), one acc-launch on each (machine ranks
# 0, 1, 2 with 2 processes each, one 6-rank job), the same ACC_STORE_SECRET exported on every machine:
# rank 0's store sits behind the authenticating gate and every other rank's client behind its relay,
# across the machines' network. All must succeed, and machine 0's launcher must not print its note
# about a store that admits any client. No interface variable is set (see netns_two_machines.sh).
#
# Usage: netns_three_machines_secret.sh [--gloo_socket_ifname] ACC_LAUNCH PROGRAM [PATTERN]
#   PROGRAM  acc-selftest or acc_cluster_trainer (run with --epochs 2), or any program with PATTERN
#   PATTERN  an extended regular expression machine 0's output must match; default: acc-selftest's
#            or acc_cluster_trainer's success line for 6 processes, after the program's name
#   --gloo_socket_ifname  export GLOO_SOCKET_IFNAME=eth0 (the machines' interface) on every machine
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
machines=3
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

# Nothing from the caller's environment chooses the interface or the rendezvous.
unset GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME TP_SOCKET_IFNAME GLOO_DEVICE_TRANSPORT \
  MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK ACC_STORE_SECRET
while read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(SLURM_|OMPI_|PMI_|PMIX_|ACCELERATE_)')
((set_ifname)) && export GLOO_SOCKET_IFNAME=eth0
# The same secret on every machine (the machines inherit this environment), 16 characters or more.
ACC_STORE_SECRET="netns-test-$$-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
export ACC_STORE_SECRET

# shellcheck source=netns_machines.sh
. "$here/netns_machines.sh"
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
if grep -q "admits any client" "$work/machine0.log"; then
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
echo "$( ((status == 0)) && echo PASS || echo FAIL ): three machines with ACC_STORE_SECRET, $(basename "$program"), GLOO_SOCKET_IFNAME $( ((set_ifname)) && echo "=eth0" || echo unset), $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
exit $status
