#!/usr/bin/env bash
# Jobs that share a machine (issue 19 item 1): ROUNDS times, JOBS acc-launch jobs of 2 ranks each are
# started at the same moment, all with the default port. Every job must run to the end on its own:
# each rank checks that all its peers were started by its own acc-launch, and rank 0 that the store
# listens on loopback only. Before the launcher reserved the port for rank 0, one job in most rounds
# died with "address already in use", or its ranks joined another job's store.
# Usage: concurrent_jobs.sh <acc-launch> <acc_rendezvous_worker> [ROUNDS] [JOBS]
set -u
launch=$1
worker=$2
rounds=${3:-20}
jobs_per_round=${4:-4}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$work"' EXIT
failures=0
for round in $(seq 1 "$rounds"); do
  pids=()
  for job in $(seq 1 "$jobs_per_round"); do
    # --quiet: the note about the default port moving is expected for all jobs but one.
    timeout 120 "$launch" --cpu --num_processes 2 --quiet "$worker" 60000 same_parent \
      > "$work/r$round-j$job.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    job=$((i + 1))
    log="$work/r$round-j$job.log"
    if ! wait "${pids[$i]}"; then
      echo "round $round, job $job failed:"; sed 's/^/  | /' "$log"; failures=$((failures + 1))
    elif [ "$(grep -c '^\[rank[01]\]: OK same_parent' "$log")" != 2 ]; then
      echo "round $round, job $job: not both ranks reported OK:"; sed 's/^/  | /' "$log"; failures=$((failures + 1))
    fi
  done
done
# The store's address, checked once on a job of its own (the jobs above move off the default port).
timeout 120 "$launch" --cpu --num_processes 2 --main_process_port 0 --quiet "$worker" 60000 loopback \
  > "$work/loopback.log" 2>&1 || { echo "the loopback check failed:"; sed 's/^/  | /' "$work/loopback.log"; failures=$((failures + 1)); }
total=$((rounds * jobs_per_round))
echo "$((total - failures + 0)) of $total jobs (and the loopback check) ran alone to the end; $failures failure(s)"
[ "$failures" = 0 ]
