#!/usr/bin/env bash
# One acc-launch per node in a batch job: sbatch (on the SLURM box, slurm_box.sh) runs a script of two
# job steps on 2 nodes, each `srun --ntasks-per-node=1 acc-launch --cpu --num_processes 4 TRAINER`:
#   step 0: acc-launch reads SLURM_NODEID, SLURM_NNODES and SLURM_STEP_NODELIST itself;
#   step 1: the same given as flags: --machine_rank $SLURM_NODEID --num_machines $SLURM_NNODES
#           --main_process_ip <first node of the job>.
# Both must train 4 processes whose final weights equal one plain process's (split batches). The steps
# use --kill-on-bad-exit=1: a failed launcher ends the step at once (without it, a machine-1 acc-launch
# whose machine 0 has already ended can wait for the rendezvous store until the job's time is up).
# Usage: slurm_sbatch_per_node_launcher.sh <acc_cluster_trainer> <acc-launch>
# Exit status: 0 pass, 1 fail (job output and logs printed), 77 skip (the machine cannot host the box).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/slurm_box.sh"
slurm_box_enter "$@"

slurm_box_begin "<acc_cluster_trainer> <acc-launch>" "$@"
trainer=${TOOLS[0]}
launch=${TOOLS[1]}
work=$WORK

start=$SECONDS
slurm_box_reference_run "$trainer"

cat >job.sh <<EOF
#!/usr/bin/env bash
#SBATCH --job-name=per-node-launcher
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --time=5
#SBATCH --output=$work/job.out
set -u
echo "step 0: acc-launch reads SLURM's variables"
srun --kill-on-bad-exit=1 --ntasks-per-node=1 "$launch" --cpu --num_processes 4 "$trainer" --weights_out "$work/auto.txt" || exit 10
first=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -n1)
echo "step 1: explicit --machine_rank --num_machines --main_process_ip \$first"
srun --kill-on-bad-exit=1 --ntasks-per-node=1 bash -c 'exec "\$0" --cpu --num_processes 4 --machine_rank "\$SLURM_NODEID" \\
    --num_machines "\$SLURM_NNODES" --main_process_ip "\$1" "\$2" --weights_out "\$3"' \\
  "$launch" "\$first" "$trainer" "$work/explicit.txt" || exit 11
echo "job script done"
EOF
chmod +x job.sh

# Submit, then poll (sbatch --wait polls at growing intervals of up to 32 s; this takes 0.2 s steps):
# the job has ended once it leaves the PENDING/RUNNING/COMPLETING states; scontrol keeps it MinJobAge
# (30 s) after that, with its state and exit code.
jobid=$(slurm_box_timeout 30 sbatch --parsable job.sh 2>sbatch.log) || { show sbatch.log; failed "sbatch failed"; }
jobid=${jobid%%;*}
state='' deadline=$((SECONDS + 120))
while ((SECONDS < deadline)); do
  info=$(scontrol -o show job "$jobid" 2>/dev/null)
  state=$(sed -n 's/.* JobState=\([A-Z_]*\) .*/\1/p' <<<"$info")
  case $state in PENDING | RUNNING | COMPLETING | CONFIGURING | "") sleep 0.2 ;; *) break ;; esac
done
exitcode=$(sed -n 's/.* ExitCode=\([0-9:]*\) .*/\1/p' <<<"$info")
if [[ $state != COMPLETED || $exitcode != 0:0 ]]; then
  [[ -f job.out ]] && show job.out
  if [[ $state =~ ^(PENDING|RUNNING|COMPLETING|CONFIGURING)?$ ]]; then
    scancel "$jobid"
    failed "batch job $jobid did not end within 120 s (state ${state:-unknown})"
  fi
  failed "batch job $jobid ended $state, exit code $exitcode (10: step 0 failed, 11: step 1 failed)"
fi
[[ -f job.out ]] || failed "batch job $jobid wrote no output file"
# Each step prints "4 process(es)" (once per node: the local main process of each).
steps=$(awk '/^step 0:/ {s = 0} /^step 1:/ {s = 1} /cluster_trainer: 4 process\(es\), launcher / {n[s]++}
             END {print (n[0] > 0) + (n[1] > 0)}' job.out)
if [[ $steps != 2 ]] || ! grep -q "^job script done" job.out; then
  show job.out
  failed "job $jobid: the output does not show both steps training 4 processes"
fi
python3 "$here/same_weights.py" "$work/one.txt" "$work/auto.txt" --rtol 1e-4 ||
  { show job.out; failed "step 0 (acc-launch reads SLURM): weights differ from one process's"; }
python3 "$here/same_weights.py" "$work/one.txt" "$work/explicit.txt" --rtol 1e-4 ||
  { show job.out; failed "step 1 (explicit flags): weights differ from one process's"; }
grep 'process(es)' job.out | sort | uniq -c | sed 's/^/  /'
echo "PASS: sbatch job $jobid, one acc-launch per node, both steps train like one process ($((SECONDS - start)) s)"
