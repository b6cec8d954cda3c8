#!/usr/bin/env bash
# Start-up time of acc-launch against torchrun (acc's venv), both starting 4 processes of a trivial
# program, interleaved in one run; prints the median of each and the ratio (target: acc-launch at
# least 10x faster). Usage: launch_startup.sh <acc-launch> [runs]
set -euo pipefail
launch=$1
runs=${2:-10}
torchrun=${ACC_VENV:-$HOME/.cache/acc/venv}/bin/torchrun
now() { date +%s%N; }
acc_times=() torch_times=()
for _ in $(seq "$runs"); do
  t0=$(now); "$launch" -q --cpu -n 4 --main_process_port 0 /bin/true > /dev/null; t1=$(now)
  "$torchrun" --nproc_per_node 4 --master_port 0 --no-python /bin/true > /dev/null 2>&1; t2=$(now)
  acc_times+=($(( (t1 - t0) / 1000 ))) torch_times+=($(( (t2 - t1) / 1000 )))
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
acc_us=$(median "${acc_times[@]}") torch_us=$(median "${torch_times[@]}")
echo "4 processes of /bin/true, median of $runs: acc-launch $((acc_us / 1000)) ms, torchrun $((torch_us / 1000)) ms"
awk -v a="$acc_us" -v t="$torch_us" 'BEGIN { r = t / a; printf "ratio torchrun/acc-launch = %.1f (target >= 10) %s\n", r, (r >= 10 ? "met" : "MISSED") }'
