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

[[ $# == 1 ]] || slurm_box_fail "usage: $0 <acc_cluster_trainer>"
trainer=$(readlink -f "$1")
[[ -x $trainer ]] || slurm_box_fail "$1 is not an executable"
box=$(mktemp -d)
slurm_box_start "$box"
work=$box/work
mkdir -p "$work" && cd "$work" || exit 1

show() { echo "--- $1 ---"; sed 's/^/  | /' "$1"; }
failed() { echo "FAIL: $*"; slurm_box_logs 20; exit 1; }

start=$SECONDS
slurm_box_timeout 60 "$trainer" --weights_out "$work/one.txt" >one.log 2>&1
rc=$?
((rc == 0)) || { show one.log; failed "the one-process run exited $rc"; }
slurm_box_timeout 60 srun --kill-on-bad-exit=1 -N2 --ntasks-per-node=2 "$trainer" --weights_out "$work/four.txt" >four.log 2>&1
rc=$?
((rc == 0)) || { show four.log; failed "srun -N2 --ntasks-per-node=2 exited $rc$( ((rc == 124)) && echo ' (timed out after 60 s)')"; }
grep -q 'cluster_trainer: 4 process(es), launcher slurm, job [0-9]' four.log ||
  { show four.log; failed "the srun job did not print '4 process(es), launcher slurm, job <id>'"; }
python3 "$here/same_weights.py" "$work/one.txt" "$work/four.txt" --rtol 1e-4 ||
  failed "the weights of 4 SLURM tasks differ from one process's"
grep -m1 'process(es)' four.log
echo "PASS: srun -N2 --ntasks-per-node=2 trains like one process ($((SECONDS - start)) s)"
