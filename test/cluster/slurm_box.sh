# shellcheck shell=bash
# A real SLURM "in a box" for the tests of test/cluster: slurmctld, two slurmd (nodes n1 and n2, both on
# 127.0.0.1) and munged, all on this machine, all with their files in one private directory. Needs root,
# util-linux's unshare and setpriv, and the packages of scripts/packages/cluster.txt.
#
# Use, at the top of a test script (which must be run as a file, not sourced):
#
#   source "$(dirname "$0")/slurm_box.sh"
#   slurm_box_enter "$@"            # re-runs this script inside the box's namespaces (see below)
#   box=$(mktemp -d)
#   slurm_box_start "$box"          # daemons up, both nodes idle; stopped and $box removed at exit
#   slurm_box_timeout 60 srun -N2 --ntasks-per-node=2 hostname
#
# slurm_box_enter ARGS: the script re-runs itself (bash "$0" ARGS) under
#   setpriv --pdeathsig KILL unshare --mount --propagation private --pid --fork --mount-proc --kill-child
# and exits with its status. Why namespaces:
#   - mount namespace: the runtime takes the first node of SLURM_STEP_NODELIST (n1) as its rendezvous
#     host, so n1 and n2 must resolve. slurm_box_start bind-mounts a hosts file of its own (the
#     machine's /etc/hosts plus "127.0.0.1 n1 n2 <hostname>") over /etc/hosts; only the daemons and
#     the test's commands see it. The machine's /etc/hosts is never written.
#   - PID namespace: the re-run script is its PID 1, every daemon and job process is inside, and the
#     kernel kills them all when it exits. So nothing stays running, whatever ends the test:
#       . normal exit or failure: an EXIT trap stops the box (slurm_box_stop) and removes DIR;
#       . SIGTERM, SIGINT, SIGHUP to the test (the outer script): passed on as SIGTERM to the inner
#         one, which stops the box; the outer exits 128+N. If the inner has not ended within 30 s, the
#         outer kills the namespace;
#       . SIGKILL to the test (ctest's TIMEOUT sends SIGKILL to the test's process, CMake < 3.27):
#         unshare gets SIGKILL from setpriv's parent-death signal, the inner PID 1 gets SIGKILL from
#         --kill-child, and the kernel kills the rest of the namespace. Only DIR is left behind.
#   Inside, long commands should run through slurm_box_timeout: it waits in the background, so a
#   signal is handled at once (bash runs a trap only after the foreground command has ended).
#
# slurm_box_start DIR: DIR (private, e.g. from mktemp -d) gets a munge key (0400), munged's socket, pid,
#   log and seed, slurm.conf (ports picked free at run time), the state, spool, pid and log files of
#   slurmctld and of `slurmd -N n1` / `slurmd -N n2`. Exports SLURM_CONF, so srun, sbatch, squeue,
#   scancel and sinfo find the box. Waits (60 s at most) until sinfo shows both nodes idle. Nodes have
#   CPUs=8 (slurmd takes the configured counts, SlurmdParameters=config_overrides): three jobs of
#   2 nodes x 2 tasks run at once on a 2-core machine. No cgroups: proctrack/linuxproc, task/none.
#   It sets the EXIT, TERM, INT and HUP traps (a test keeps its own files under DIR, removed with it).
# slurm_box_stop: scancel of all jobs (then up to 10 s for the queue to empty; KillWait=2), scontrol
#   shutdown (slurmctld and both slurmd; up to 10 s), SIGTERM to munged (up to 5 s), then SIGKILL to
#   every other process left in the namespace, named on stderr. Idempotent; run by the EXIT trap.
# slurm_box_timeout SECS CMD...: CMD under timeout (SIGTERM, SIGKILL 5 s later), waited for in the
#   background; returns CMD's status (124 on timeout).
# slurm_box_logs [LINES]: the tail of every daemon log of the box, for a failure report.
#
# Exit codes of the scripts: 77 (SKIP: <reason> printed) when the machine does not allow the box: not
# root, unshare/mount refused, a daemon that cannot start. A missing package is a failure (exit 1): the
# lists of scripts/packages/ install them. Set SLURM_BOX_KEEP=1 to keep DIR (logs, slurm.conf) at exit.
# Start takes about 0.3 s (until both nodes are idle) and stop about 0.2 s on the 2-core development machine.

slurm_box_skip() {
  echo "SKIP: $*"
  exit 77
}

slurm_box_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

_slurm_box_need() {
  local cmd missing=()
  for cmd in "$@"; do command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd"); done
  if ((${#missing[@]})); then
    slurm_box_fail "command(s) not found: ${missing[*]}; install the packages of scripts/packages/cluster.txt (scripts/setup)"
  fi
}

# ---- the namespaces -------------------------------------------------------------------------------

_slurm_box_forward() {  # in the outer script: signal $1 arrived; stop the inner one, bounded
  local sig=$1 inner i
  _slurm_box_got=$sig
  [[ -n ${_slurm_box_unshare:-} ]] || exit $((128 + $(kill -l "$sig")))
  # Always SIGTERM: the inner script was started in the background, where a non-interactive bash
  # ignores SIGINT, and a signal ignored at entry cannot be trapped.
  inner=$(pgrep -P "$_slurm_box_unshare" 2>/dev/null | head -n1)
  [[ -n $inner ]] && kill -TERM "$inner" 2>/dev/null
  for ((i = 0; i < 300; i++)); do
    kill -0 "$_slurm_box_unshare" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "slurm_box: the test did not end within 30 s of SIG$sig; killing its namespace" >&2
  kill -KILL "$_slurm_box_unshare" 2>/dev/null
}

slurm_box_enter() {
  if [[ -n ${ACC_BOX_INNER:-} && ${ACC_BOX_INNER} == "${ACC_BOX_TOKEN:-}" && $$ == 1 ]]; then
    # Inside: forget any SLURM job this test itself may run in, so the box's variables are the only ones.
    local v
    for v in $(compgen -e); do
      case $v in SLURM_BOX_*) ;; SLURM_* | SBATCH_* | SRUN_* | SALLOC_* | SQUEUE_* | SINFO_* | SCANCEL_*) unset "$v" ;; esac
    done
    return 0
  fi
  [[ $(id -u) == 0 ]] || slurm_box_skip "the SLURM box needs root (daemons as SlurmUser=root, a bind mount over /etc/hosts)"
  _slurm_box_need unshare setpriv mount pgrep python3 timeout hostname munged munge unmunge slurmctld slurmd \
    srun sbatch squeue scancel sinfo scontrol
  local probe
  if ! probe=$(unshare --mount --propagation private --pid --fork --mount-proc \
      bash -c 'mount --bind /etc/hostname /etc/hostname' 2>&1); then
    slurm_box_skip "no private mount and PID namespace here (unshare --mount --pid, bind mount): $probe"
  fi
  local script token rc
  script=$(readlink -f "$0")
  token=$$.$RANDOM$RANDOM
  trap '_slurm_box_forward TERM' TERM
  trap '_slurm_box_forward INT' INT
  trap '_slurm_box_forward HUP' HUP
  ACC_BOX_INNER=$token ACC_BOX_TOKEN=$token \
    setpriv --pdeathsig KILL \
    unshare --mount --propagation private --pid --fork --mount-proc --kill-child=KILL \
    bash "$script" "$@" &
  _slurm_box_unshare=$!
  while :; do
    wait "$_slurm_box_unshare"
    rc=$?
    kill -0 "$_slurm_box_unshare" 2>/dev/null || break  # else wait was cut short by a trapped signal
  done
  [[ -n ${_slurm_box_got:-} ]] && exit $((128 + $(kill -l "$_slurm_box_got")))
  exit "$rc"
}

# ---- helpers --------------------------------------------------------------------------------------

_slurm_box_alive() {  # pid $1 exists and is not a zombie
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

_slurm_box_pid() { cat "$1" 2>/dev/null; }

slurm_box_timeout() {
  local secs=$1
  shift
  timeout -k 5 "$secs" "$@" &
  local pid=$! rc
  while :; do
    wait "$pid"
    rc=$?
    kill -0 "$pid" 2>/dev/null || return "$rc"
  done
}

slurm_box_logs() {
  local lines=${1:-40} f
  [[ -n ${SLURM_BOX_DIR:-} ]] || return 0
  for f in "$SLURM_BOX_DIR"/munged.log "$SLURM_BOX_DIR"/slurmctld.log "$SLURM_BOX_DIR"/slurmd.*.log; do
    [[ -f $f ]] || continue
    echo "--- last $lines lines of $(basename "$f") ---"
    # munged logs every credential check at Info; its warnings and errors are what matter.
    if [[ $f == */munged.log ]]; then grep -v ' Info: ' "$f"; else cat "$f"; fi | tail -n "$lines" | sed 's/^/  | /'
  done
}

# Three free TCP ports: slurmctld's, then two consecutive ones for the slurmd of n1 and n2. Between
# acc's SLURM step ports (10000-29999, common/src/slurm_step.cpp) and the kernel's ephemeral ports.
_slurm_box_ports() {
  python3 - <<'EOF'
import random, socket
def free(port):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False
    finally:
        s.close()
rng = random.SystemRandom()
ports = []
while len(ports) < 1:
    p = rng.randrange(30100, 32700)
    if free(p): ports.append(p)
while len(ports) < 3:
    p = rng.randrange(30100, 32700)
    if p not in (ports[0], ports[0] - 1) and free(p) and free(p + 1):
        ports += [p, p + 1]
print(*ports)
EOF
}

# ---- start and stop -------------------------------------------------------------------------------

# The opening every SLURM test shares. `slurm_box_begin "<trainer> <acc-launch>" "$@"` checks that the
# script got exactly those arguments and that each is an executable (their absolute paths go to the
# array TOOLS), starts a box in a fresh folder, and enters its work folder (WORK). show FILE prints a
# log, failed MESSAGE prints the daemons' last lines and exits 1.
slurm_box_begin() {
  local usage=$1
  shift
  local expected
  expected=$(wc -w <<<"$usage")
  [[ $# == "$expected" ]] || slurm_box_fail "usage: $0 $usage"
  TOOLS=()
  local tool
  for tool in "$@"; do
    [[ -x $tool ]] || slurm_box_fail "$tool is not an executable"
    TOOLS+=("$(readlink -f "$tool")")
  done
  local box
  box=$(mktemp -d)
  slurm_box_start "$box"
  WORK=$box/work
  mkdir -p "$WORK" && cd "$WORK" || exit 1
}
show() { echo "--- $1 ---"; sed 's/^/  | /' "$1"; }
failed() { echo "FAIL: $*"; slurm_box_logs 20; exit 1; }

# One plain process of the trainer, the reference every SLURM run is compared with: weights in
# $WORK/one.txt.
slurm_box_reference_run() {
  local rc
  slurm_box_timeout 60 "$1" --weights_out "$WORK/one.txt" >one.log 2>&1
  rc=$?
  ((rc == 0)) || { show one.log; failed "the one-process run exited $rc"; }
}


slurm_box_start() {
  local dir=$1
  [[ $$ == 1 && ${ACC_BOX_INNER:-} == "${ACC_BOX_TOKEN:-x}" ]] ||
    slurm_box_fail "slurm_box_start: call slurm_box_enter \"\$@\" first (the box runs in its own namespaces)"
  [[ -d $dir ]] || slurm_box_fail "slurm_box_start: $dir is not a directory"
  dir=$(cd "$dir" && pwd -P)
  chmod 0700 "$dir"
  SLURM_BOX_DIR=$dir
  _slurm_box_stopped=
  trap '_slurm_box_exit' EXIT
  trap '_slurm_box_signal TERM' TERM
  trap '_slurm_box_signal INT' INT
  trap '_slurm_box_signal HUP' HUP

  local host
  host=$(hostname)
  { cat /etc/hosts; echo "127.0.0.1 n1 n2 $host"; } >"$dir/hosts"
  mount --bind "$dir/hosts" /etc/hosts || slurm_box_skip "cannot bind-mount $dir/hosts over /etc/hosts"
  getent hosts n1 >/dev/null || slurm_box_skip "n1 does not resolve through $dir/hosts (nsswitch without files?)"

  # munge: a key of our own, our own socket; as root munged wants --force.
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge.key"
  if ! munged --force --socket="$dir/munge.socket" --key-file="$dir/munge.key" --log-file="$dir/munged.log" \
      --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" >"$dir/munged.out" 2>&1; then
    cat "$dir/munged.out" "$dir/munged.log" 2>/dev/null | sed 's/^/  | /'
    slurm_box_skip "munged cannot start (log above)"
  fi
  local i
  for ((i = 0; i < 50; i++)); do
    munge -S "$dir/munge.socket" -n 2>/dev/null | unmunge -S "$dir/munge.socket" >/dev/null 2>&1 && break
    sleep 0.1
  done
  ((i < 50)) || { slurm_box_logs 40; slurm_box_skip "munged does not answer on $dir/munge.socket (log above)"; }

  local ctld_port d1 d2
  read -r ctld_port d1 d2 <<<"$(_slurm_box_ports)"
  [[ -n $d2 ]] || slurm_box_fail "could not pick free ports"
  mkdir -p "$dir/state" "$dir/spool/n1" "$dir/spool/n2"
  cat >"$dir/slurm.conf" <<EOF
# The SLURM box of test/cluster/slurm_box.sh; everything under $dir.
ClusterName=accbox
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
NodeName=n[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=$d1-$d2 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=box Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf

  slurmctld -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 ||
    { cat "$dir/slurmctld.out"; slurm_box_logs 40; slurm_box_skip "slurmctld cannot start (log above)"; }
  local n
  for n in n1 n2; do
    slurmd -f "$SLURM_CONF" -N "$n" >"$dir/slurmd.$n.out" 2>&1 ||
      { cat "$dir/slurmd.$n.out"; slurm_box_logs 40; slurm_box_skip "slurmd -N $n cannot start (log above)"; }
  done
  local states=
  for ((i = 0; i < 600; i++)); do
    states=$(sinfo -h -N -o '%N=%t' 2>/dev/null | sort -u | tr '\n' ' ')
    [[ $states == "n1=idle n2=idle " ]] && return 0
    if ((i % 10 == 9)); then
      local d
      for d in "$dir/slurmctld.pid" "$dir/slurmd.n1.pid" "$dir/slurmd.n2.pid"; do
        if ! _slurm_box_alive "$(_slurm_box_pid "$d")"; then
          slurm_box_logs 40
          slurm_box_skip "$(basename "$d" .pid) ended while the box started (logs above)"
        fi
      done
    fi
    sleep 0.1
  done
  slurm_box_logs 40
  slurm_box_skip "the nodes of the box are not idle after 60 s (sinfo: ${states:-no answer}; logs above)"
}

slurm_box_stop() {
  [[ -n ${SLURM_BOX_DIR:-} && -z ${_slurm_box_stopped:-} ]] || return 0
  _slurm_box_stopped=1
  local dir=$SLURM_BOX_DIR pids=() f p i
  for f in "$dir"/slurmctld.pid "$dir"/slurmd.*.pid "$dir"/munged.pid; do
    p=$(_slurm_box_pid "$f") && [[ -n $p ]] && pids+=("$p")
  done
  if [[ -f $dir/slurmctld.pid ]]; then
    # Jobs first (KillWait=2: SIGTERM, SIGKILL 2 s later): a slurmd told to shut down with steps still
    # running waits for them.
    timeout 5 scancel --quiet --full --user=root >/dev/null 2>&1
    for ((i = 0; i < 100; i++)); do
      [[ -z $(timeout 5 squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.1
    done
    timeout 5 scontrol shutdown >/dev/null 2>&1  # slurmctld and every slurmd
  fi
  # munged last: slurmd needs it to the end.
  for ((i = 0; i < 100; i++)); do
    local left=0
    for p in "${pids[@]}"; do
      [[ $p == $(_slurm_box_pid "$dir/munged.pid") ]] && continue
      _slurm_box_alive "$p" && left=1
    done
    ((left)) || break
    sleep 0.1
  done
  p=$(_slurm_box_pid "$dir/munged.pid")
  [[ -n $p ]] && kill -TERM "$p" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    local left=0
    for p in "${pids[@]}"; do _slurm_box_alive "$p" && left=1; done
    ((left)) || break
    sleep 0.1
  done
  # Whatever is left in the namespace (a daemon that did not stop, slurmstepd, job processes): we are
  # its PID 1, so kill -1 reaches exactly the processes of this box.
  if [[ $$ == 1 && ${ACC_BOX_INNER:-} == "${ACC_BOX_TOKEN:-x}" ]]; then
    local others=() d
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      [[ $p == 1 ]] && continue
      _slurm_box_alive "$p" && others+=("$p $(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)")
    done
    if ((${#others[@]})); then
      echo "slurm_box: killing what was left running in the box:" >&2
      printf '  | %s\n' "${others[@]}" >&2
      kill -KILL -1 2>/dev/null
    fi
  fi
  umount /etc/hosts 2>/dev/null
  unset SLURM_CONF
  return 0
}

_slurm_box_exit() {
  local rc=$?
  trap - EXIT TERM INT HUP
  slurm_box_stop
  if [[ -n ${SLURM_BOX_DIR:-} && -z ${SLURM_BOX_KEEP:-} ]]; then
    rm -rf "$SLURM_BOX_DIR"
  elif [[ -n ${SLURM_BOX_DIR:-} ]]; then
    echo "slurm_box: kept $SLURM_BOX_DIR" >&2
  fi
  exit "$rc"
}

_slurm_box_signal() {
  echo "slurm_box: SIG$1: stopping the box" >&2
  exit $((128 + $(kill -l "$1")))
}
