#!/usr/bin/env bash
# srun starts the ranks itself (no launcher): `srun -N2 --ntasks-per-node=2 TRAINER` on the SLURM box
# (slurm_box.sh) is one job of 4 processes that reads SLURM's variables (launcher slurm), and its
# final weights equal those of one plain process (split batches), up to float rounding.
# Usage: slurm_srun_trains.sh <acc_cluster_trainer>
# Exit status: 0 pass, 1 fail (the failing output printed), 77 skip (the machine cannot host the box).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/slurm_box.sh"
slurm_box_enter "$@"

slurm_box_begin "<acc_cluster_trainer>" "$@"
trainer=${TOOLS[0]}
work=$WORK

start=$SECONDS
slurm_box_reference_run "$trainer"
slurm_box_timeout 60 srun --kill-on-bad-exit=1 -N2 --ntasks-per-node=2 "$trainer" --weights_out "$work/four.txt" >four.log 2>&1
rc=$?
((rc == 0)) || { show four.log; failed "srun -N2 --ntasks-per-node=2 exited $rc$( ((rc == 124)) && echo ' (timed out after 60 s)')"; }
grep -q 'cluster_trainer: 4 process(es), launcher slurm, job [0-9]' four.log ||
  { show four.log; failed "the srun job did not print '4 process(es), launcher slurm, job <id>'"; }
python3 "$here/same_weights.py" "$work/one.txt" "$work/four.txt" --rtol 1e-4 ||
  failed "the weights of 4 SLURM tasks differ from one process's"
grep -m1 'process(es)' four.log
echo "PASS: srun -N2 --ntasks-per-node=2 trains like one process ($((SECONDS - start)) s)"
