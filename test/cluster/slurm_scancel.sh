#!/usr/bin/env bash
# scancel ends a training everywhere: on the SLURM box (slurm_box.sh) a long training (100 epochs,
# 200 ms per step) is started on 2 nodes
#   direct:    srun -N2 --ntasks-per-node=2 TRAINER ...              (4 ranks started by srun)
#   launcher:  srun -N2 --ntasks-per-node=1 ACC_LAUNCH --cpu --num_processes 4 TRAINER ...
# and once all its processes run, it is cancelled with scancel. Within 15 s no process of the trainer
# or of acc-launch may remain (each run's processes are found by a command-line argument of their own);
# the seconds it took are reported.
# Usage: slurm_scancel.sh <acc_cluster_trainer> <acc-launch>
# Exit status: 0 pass, 1 fail (what was left and the logs printed), 77 skip (the machine cannot host the box).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/slurm_box.sh"
slurm_box_enter "$@"

slurm_box_begin "<acc_cluster_trainer> <acc-launch>" "$@"
trainer=${TOOLS[0]}
launch=${TOOLS[1]}
work=$WORK

comm_trainer=$(basename "$trainer" | cut -c1-15)
comm_launch=$(basename "$launch" | cut -c1-15)

# The live processes of the trainer and of acc-launch whose command line holds $1 (srun, timeout and
# the shell that started them hold it too, and are not counted). The box is a PID namespace of its own:
# pgrep sees only its processes.
procs() {
  local p comm
  for p in $(pgrep -f -- "$1"); do
    comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
    [[ $comm == "$comm_trainer" || $comm == "$comm_launch" ]] || continue
    _slurm_box_alive "$p" && echo "$p"
  done
}

now() { date +%s.%N; }

failures=0
# run NAME EXPECTED_PROCESSES SRUN_ARGS...
run() {
  local name=$1 expected=$2
  shift 2
  local marker=$work/$name-weights.txt log=$work/$name.log
  slurm_box_timeout 120 srun -N2 --job-name="cancel-$name" "$@" --step_sleep_ms 200 --epochs 100 \
    --weights_out "$marker" >"$log" 2>&1 &
  local srun_pid=$! i n=0 jobid
  for ((i = 0; i < 300; i++)); do
    n=$(procs "$marker" | wc -l)
    ((n >= expected)) && break
    kill -0 "$srun_pid" 2>/dev/null || break
    sleep 0.1
  done
  jobid=$(squeue -h -n "cancel-$name" -o %i | head -n1)
  if ((n < expected)) || [[ -z $jobid ]]; then
    show "$log"
    echo "FAIL $name: $n of $expected processes running after 30 s (job ${jobid:-not in squeue})"
    failures=$((failures + 1))
    return
  fi
  sleep 1  # let it train a few steps
  local t0 t1 left
  t0=$(now)
  scancel "$jobid"
  for ((i = 0; i < 150; i++)); do
    left=$(procs "$marker")
    [[ -z $left ]] && break
    sleep 0.1
  done
  t1=$(now)
  local secs
  secs=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
  if [[ -n $left ]]; then
    echo "FAIL $name: 15 s after scancel of job $jobid, processes are left:"
    for p in $left; do echo "  | $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"; done
    show "$log"
    failures=$((failures + 1))
  else
    echo "$name: job $jobid ($expected processes: $*) cancelled; no trainer or acc-launch process left after $secs s"
  fi
  # srun itself ends once the step is gone.
  for ((i = 0; i < 100; i++)); do kill -0 "$srun_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$srun_pid" 2>/dev/null; then
    echo "FAIL $name: srun still runs 10 s after the processes ended"
    show "$log"
    failures=$((failures + 1))
  fi
  wait "$srun_pid" 2>/dev/null
}

start=$SECONDS
run direct 4 --ntasks-per-node=2 "$trainer"
run launcher 6 --ntasks-per-node=1 "$launch" --cpu --num_processes 4 "$trainer"
if ((failures)); then
  slurm_box_logs 30
  echo "FAIL: $failures check(s) failed"
  exit 1
fi
echo "PASS: scancel ends both trainings ($((SECONDS - start)) s)"
