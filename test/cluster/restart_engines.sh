#!/usr/bin/env bash
# The engines that start every rank on one machine, started for real: mpirun (Open MPI), torchrun with
# static and with c10d rendezvous, and the resume pattern of docs/launcher.md under torchrun
# --max_restarts 1 and acc-launch --max_restarts 1: the last rank dies in epoch 2 of the first attempt,
# the restarted job loads the newest complete checkpoint and ends with the uninterrupted run's weights.
# Every run is compared with one plain process of the same trainer (same_weights.py).
# Usage: restart_engines.sh <acc_cluster_trainer> <acc-launch> <torchrun>
# Exit: 0 pass, 1 fail, 77 skip (an engine is not installed).
set -u
trainer=$(realpath "$1") launch=$(realpath "$2") torchrun=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
cleanup() {
  pkill -KILL -f "$work" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin, scripts/packages/cluster.txt)"; exit 77; }
[ -x "$torchrun" ] || { echo "SKIP: $torchrun not found (run scripts/setup)"; exit 77; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK ACC_JOB_ID
status=0
fail() { echo "FAIL: $*"; status=1; }

# Every run works in its own folder: checkpoints never cross runs, and the folder's path marks its
# processes for the final cleanup.
run() {  # run NAME COMMAND...: runs in $work/NAME with a 120 s limit, output in $work/NAME.log
  local name=$1; shift
  mkdir -p "$work/$name"
  local start=$SECONDS
  (cd "$work/$name" && timeout -k 5 120 "$@") > "$work/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - start)) s"
  [ $rc -eq 0 ] || { fail "$name exited with $rc"; tail -20 "$work/$name.log"; }
  return $rc
}
same() {  # same NAME REFERENCE RTOL
  python3 "$here/same_weights.py" "$work/$1/weights.txt" "$work/$2/weights.txt" --rtol "$3" ||
    fail "$1's weights differ from $2's"
}
expect() {  # expect NAME PATTERN
  grep -q -- "$2" "$work/$1.log" || { fail "$1 did not print '$2'"; tail -20 "$work/$1.log"; }
}

run one "$trainer" --weights_out weights.txt

run mpirun mpirun --allow-run-as-root --oversubscribe -np 2 -x MASTER_PORT="$(free_port)" \
  "$trainer" --weights_out weights.txt && {
  expect mpirun "2 process(es), launcher openmpi"; same mpirun one 1e-4; }

run torchrun_static "$torchrun" --no-python --nproc_per_node 2 --master_port "$(free_port)" \
  "$trainer" --weights_out weights.txt && {
  expect torchrun_static "2 process(es), launcher env"; same torchrun_static one 1e-4; }

run torchrun_c10d "$torchrun" --no-python --nnodes 1 --nproc_per_node 2 --rdzv_backend c10d \
  --rdzv_endpoint "127.0.0.1:$(free_port)" --rdzv_id c10d-test "$trainer" --weights_out weights.txt && {
  expect torchrun_c10d "2 process(es), launcher env, job c10d-test"; same torchrun_c10d one 1e-4; }

# The uninterrupted two-process run the restarted ones must equal, and the restarted runs.
run straight "$launch" --cpu --num_processes 2 --main_process_port 0 \
  "$trainer" --weights_out weights.txt --checkpoint_dir ckpt --epochs 4
resume_args=(--weights_out weights.txt --checkpoint_dir ckpt --epochs 4 --fail_in_epoch 3)
run torchrun_restart "$torchrun" --no-python --nproc_per_node 2 --master_port "$(free_port)" --max_restarts 1 \
  "$trainer" "${resume_args[@]}" && {
  expect torchrun_restart "fails in epoch 3 as asked"
  expect torchrun_restart "resumed from ckpt/checkpoints/checkpoint_1 at epoch 3"
  same torchrun_restart straight 1e-6; }
run acc_launch_restart "$launch" --cpu --num_processes 2 --main_process_port 0 --max_restarts 1 \
  "$trainer" "${resume_args[@]}" && {
  expect acc_launch_restart "restarting all ranks (restart 1 of 1)"
  expect acc_launch_restart "resumed from ckpt/checkpoints/checkpoint_1 at epoch 3"
  same acc_launch_restart straight 1e-6; }

leftover=$(pgrep -f "$work" || true)
[ -z "$leftover" ] || fail "processes left behind: $leftover"
[ $status -eq 0 ] && echo "PASS: mpirun, torchrun (static, c10d, restart) and acc-launch restart equal one process"
exit $status
