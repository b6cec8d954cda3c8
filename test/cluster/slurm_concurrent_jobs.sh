#!/usr/bin/env bash
# Jobs that share nodes: ROUNDS times, 3 srun jobs of 2 nodes x 2 tasks are started at the same moment
# on the same two nodes of the SLURM box (slurm_box.sh), with MASTER_PORT unset, so every job picks its
# rendezvous port itself. Each job must exit 0, print "4 process(es)" and its own job id (the id srun
# gave it), never another job's.
# Usage: slurm_concurrent_jobs.sh <acc_cluster_trainer> [ROUNDS]   (ROUNDS: 5 if not given)
# Exit status: 0 pass, 1 fail (the failing jobs' output printed), 77 skip (the machine cannot host the box).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/slurm_box.sh"
slurm_box_enter "$@"

[[ $# == 1 || $# == 2 ]] || slurm_box_fail "usage: $0 <acc_cluster_trainer> [ROUNDS]"
trainer=$(readlink -f "$1")
rounds=${2:-5}
jobs_per_round=3
[[ -x $trainer ]] || slurm_box_fail "$1 is not an executable"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || slurm_box_fail "ROUNDS must be a positive number, not '$rounds'"
unset MASTER_PORT MASTER_ADDR ACCELERATE_MAIN_PROCESS_PORT
box=$(mktemp -d)
slurm_box_start "$box"
work=$box/work
mkdir -p "$work" && cd "$work" || exit 1

started=0 completed=0
start=$SECONDS
for round in $(seq 1 "$rounds"); do
  pids=()
  for job in $(seq 1 "$jobs_per_round"); do
    # -v: srun names the job id it got ("srun: jobid N: ..."); the job's own lines are compared to it.
    slurm_box_timeout 60 srun -v --kill-on-bad-exit=1 -N2 --ntasks-per-node=2 --job-name="r$round-j$job" \
      "$trainer" --epochs 2 >"r$round-j$job.log" 2>&1 &
    pids+=($!)
    started=$((started + 1))
  done
  for i in "${!pids[@]}"; do
    job=$((i + 1))
    log=r$round-j$job.log
    wait "${pids[$i]}"
    rc=$?
    id=$(sed -n 's/^srun: jobid \([0-9]*\):.*/\1/p' "$log" | head -n1)
    lines=$(grep 'cluster_trainer: .* process(es), launcher' "$log")
    why=
    if ((rc != 0)); then
      why="exited $rc$( ((rc == 124)) && echo ' (timed out after 60 s)')"
    elif [[ -z $id ]]; then
      why="srun named no job id"
    elif ! grep -q 'cluster_trainer: 4 process(es), launcher slurm, ' <<<"$lines"; then
      why="no line '4 process(es), launcher slurm'"
    elif grep -v -q "cluster_trainer: 4 process(es), launcher slurm, job $id\.[0-9]*, done" <<<"$lines"; then
      why="a line names another job than its own ($id)"
    fi
    if [[ -n $why ]]; then
      echo "round $round, job $job (job id ${id:-?}): $why:"
      # srun -v's own lines, but its errors, are left out.
      grep -v '^srun: ' "$log" | sed 's/^/  | /'
      grep '^srun: .*error' "$log" | sed 's/^/  | /'
    else
      completed=$((completed + 1))
    fi
  done
done
wall=$((SECONDS - start))
echo "$completed/$started jobs completed ($rounds rounds of $jobs_per_round concurrent srun jobs, -N2 --ntasks-per-node=2; wall time $wall s)"
if ((completed != started)); then
  slurm_box_logs 30
  echo "FAIL: $((started - completed)) job(s) did not complete"
  exit 1
fi
echo "PASS"
