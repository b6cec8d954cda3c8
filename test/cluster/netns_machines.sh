# shellcheck shell=bash
# Several "machines" on this one: Linux network namespaces joined by a bridge, for the multi-machine
# tests. Source it from a bash test script:
#
#   . "$(dirname "$0")/netns_machines.sh"
#   machines_start 2                       # or prints "SKIP: <reason>" and exits 77
#   on_machine 0 CMD ARGS...               # runs CMD inside machine 0 (ip netns exec)
#   machine_addr 1                         # machine 1's address, also ${MACHINE_ADDR[1]}
#   machine_reaches 0 1                    # does machine 0 reach machine 1? (TCP probe, no ping needed)
#   cut_link 1; restore_link 1             # machine 1 off the network and back
#   machines_at_exit 'rm -rf "$work"'      # runs at exit, after the machines are gone
#   machines_stop                          # also runs by itself on EXIT, INT, TERM and HUP
#
# Layout. Everything the test creates lives in namespaces of its own, named after the run (<run> is
# accnm<pid>r<random>: accnm<run>-s, accnm<run>-m<k>), so that concurrent tests never collide, not even
# from different PID namespaces, and nothing is added to the host's own network: no link, no address,
# no route, no firewall rule, no sysctl.
#   - <run>-s, the switch: the bridge br0 and one port p<k> per machine. The bridge is not in the
#     host's namespace so that the host's firewall never sees the bridged frames (with br_netfilter
#     loaded, bridged IPv4 goes through the iptables/nftables hooks of the bridge's namespace; the
#     switch namespace has no rules, and its own bridge-nf-call-* sysctls, per namespace since Linux
#     5.3, are set to 0 there anyway).
#   - <run>-m<k>, machine k: lo up, and eth0 (the other end of p<k>) with 10.231.<pid mod 250 + 1>.<k+1>/24.
#     Every machine calls its interface eth0, so that one GLOO_SOCKET_IFNAME=eth0 fits all of them.
#     The machines have no other route: the subnet cannot clash with the host's routes.
# The machines share the host's file system, processes' view of /etc and host name: the host name
# resolves as on the host (here to 127.0.0.1), which is what real machines with Debian's /etc/hosts
# look like to Gloo. Keep it that way.
#
# A test killed with SIGKILL cannot clean up; the next machines_start removes what it left. A run
# holds an flock on /run/lock/<run>.lock (/tmp where /run/lock is missing) while it lives (its
# processes in the machines do not inherit it), so that another run, in whatever PID namespace, can
# tell a live run's namespaces from a dead one's.

MACHINE_IFNAME=eth0
MACHINE_ADDR=()
MACHINE_NETNS=()
_MACHINES_TAG=""
_MACHINES_LOCK=""
_MACHINES_LOCK_FD=""
_MACHINES_SWITCH=""
_MACHINES_COUNT=0
_MACHINES_AT_EXIT=()
_MACHINES_PREFIX=accnm

# Nothing from the caller's environment may choose the interface or the rendezvous of a test's job:
# the variables of every launcher acc reads are removed.
machines_clear_launch_environment() {
  unset GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME TP_SOCKET_IFNAME GLOO_DEVICE_TRANSPORT \
    MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK ACC_STORE_SECRET ACC_JOB_ID
  local name
  while read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(SLURM_|OMPI_|PMI_|PMIX_|PET_|ACCELERATE_)')
}

_machines_log() { echo "netns_machines: $*" >&2; }

_machines_skip() {
  echo "SKIP: $*"
  exit 77
}

# Kills every process inside namespace $1 (TERM, then KILL), then deletes the namespace.
_machines_remove_netns() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null)
  if [[ -n $pids ]]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for _ in $(seq 1 40); do  # 2 s for a clean stop
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [[ -z $pids ]] && break
      sleep 0.05
    done
    for _ in $(seq 1 100); do  # then KILL until none is left (5 s at most)
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [[ -z $pids ]] && break
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null
      sleep 0.05
    done
    [[ -n $pids ]] && _machines_log "processes still in $ns after SIGKILL: $pids"
  fi
  ip netns delete "$ns" 2>/dev/null || {
    [[ -e /run/netns/$ns ]] && _machines_log "cannot delete namespace $ns"
  }
}

_machines_lock_dir() {
  if [[ -d /run/lock && -w /run/lock ]]; then echo /run/lock; else echo /tmp; fi
}

# Whether the run that created namespaces named <tag>-... is still alive: its lock is held, or (no lock
# file) the PID in its name is alive here.
_machines_run_alive() {
  local tag=$1 pid=$2 lock
  lock=$(_machines_lock_dir)/$tag.lock
  if [[ -e $lock ]] && command -v flock > /dev/null; then
    ! flock -n "$lock" true
    return
  fi
  kill -0 "$pid" 2>/dev/null
}

# The namespaces (and lock files) of earlier runs that are gone (a test killed with SIGKILL).
_machines_remove_stale() {
  local ns pid tag lock
  while read -r ns _; do
    [[ $ns =~ ^(${_MACHINES_PREFIX}([0-9]+)r[0-9]+)-(s|m[0-9]+)$ ]] || continue
    tag=${BASH_REMATCH[1]}
    pid=${BASH_REMATCH[2]}
    _machines_run_alive "$tag" "$pid" && continue
    _machines_log "removing $ns, left by an earlier run that is gone"
    _machines_remove_netns "$ns"
  done < <(ip netns list 2>/dev/null)
  command -v flock > /dev/null || return 0
  for lock in "$(_machines_lock_dir)/${_MACHINES_PREFIX}"*.lock; do
    [[ -e $lock ]] || continue
    tag=$(basename "$lock" .lock)
    ip netns list 2>/dev/null | grep -q "^$tag-" && continue
    [[ -n $(find "$lock" -mmin +1 2>/dev/null) ]] || continue  # not one being created now
    flock -n "$lock" rm -f "$lock"
  done
}

_machines_on_exit() {
  local rc=$?
  trap - EXIT
  machines_stop
  local hook
  for hook in "${_MACHINES_AT_EXIT[@]}"; do eval "$hook"; done
  exit "$rc"
}

_machines_on_signal() {
  trap - INT TERM HUP
  _machines_log "interrupted (signal $(($1 - 128))), stopping the machines"
  exit "$1"  # runs the EXIT trap
}

# machines_at_exit CMD: CMD (a string, eval'ed) runs at exit after machines_stop; use it instead of a
# trap of your own (a second `trap ... EXIT` would replace the library's).
machines_at_exit() { _MACHINES_AT_EXIT+=("$1"); }

# machines_start N: the switch and N machines, all reachable from each other; exits 77 with
# "SKIP: <reason>" when this machine cannot host them, returns 1 when they were built but do not work.
machines_start() {
  local count=$1 k
  [[ $count =~ ^[1-9][0-9]*$ && $count -le 250 ]] || { _machines_log "machines_start: bad count '$count'"; return 1; }
  [[ -z $_MACHINES_TAG ]] || { _machines_log "machines_start: machines are already started"; return 1; }
  command -v ip > /dev/null || _machines_skip "no 'ip' command (iproute2)"
  ip netns help 2>&1 | grep -q 'netns' || _machines_skip "'ip' has no netns support"
  [[ $EUID -eq 0 ]] || _machines_skip "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN); running as uid $EUID"

  _machines_remove_stale
  local tag
  while :; do
    tag=${_MACHINES_PREFIX}$$r$RANDOM
    ip netns list 2>/dev/null | grep -q "^$tag-" || break
  done
  if command -v flock > /dev/null; then
    _MACHINES_LOCK=$(_machines_lock_dir)/$tag.lock
    exec {_MACHINES_LOCK_FD}>> "$_MACHINES_LOCK" || _machines_skip "cannot create $_MACHINES_LOCK"
    flock -n "$_MACHINES_LOCK_FD" || { _machines_log "$_MACHINES_LOCK is locked"; return 1; }
  fi
  _MACHINES_TAG=$tag
  _MACHINES_SWITCH=${_MACHINES_TAG}-s
  local subnet=10.231.$(($$ % 250 + 1))
  local err
  if ! err=$(ip netns add "$_MACHINES_SWITCH" 2>&1); then
    _MACHINES_TAG=""
_MACHINES_LOCK=""
_MACHINES_LOCK_FD=""
    _machines_skip "cannot create a network namespace (ip netns add: ${err:-failed}); needs CAP_NET_ADMIN and CAP_SYS_ADMIN"
  fi
  trap _machines_on_exit EXIT
  trap '_machines_on_signal 130' INT
  trap '_machines_on_signal 143' TERM
  trap '_machines_on_signal 129' HUP

  ip -n "$_MACHINES_SWITCH" link set lo up
  err=$(ip -n "$_MACHINES_SWITCH" link add br0 type bridge 2>&1) || _machines_skip "cannot create a bridge: $err"
  ip -n "$_MACHINES_SWITCH" link set br0 up
  # br_netfilter: bridged frames of this namespace skip iptables/ip6tables/arptables. Per namespace
  # (Linux >= 5.3); on older kernels the files do not exist here, and the switch's empty rule set
  # lets everything through anyway.
  ip netns exec "$_MACHINES_SWITCH" bash -c \
    'for f in /proc/sys/net/bridge/bridge-nf-call-*; do [[ -w $f ]] && echo 0 > "$f"; done' 2>/dev/null

  for ((k = 0; k < count; k++)); do
    local ns=${_MACHINES_TAG}-m$k
    MACHINE_NETNS[k]=$ns
    MACHINE_ADDR[k]=$subnet.$((k + 1))
    _MACHINES_COUNT=$((k + 1))
    err=$(ip netns add "$ns" 2>&1) || { _machines_log "ip netns add $ns: $err"; return 1; }
    err=$(ip -n "$_MACHINES_SWITCH" link add "p$k" type veth peer name "$MACHINE_IFNAME" netns "$ns" 2>&1) ||
      _machines_skip "cannot create a veth pair: $err"
    ip -n "$_MACHINES_SWITCH" link set "p$k" master br0 up || return 1
    ip -n "$ns" link set lo up || return 1
    ip -n "$ns" addr add "${MACHINE_ADDR[k]}/24" dev "$MACHINE_IFNAME" || return 1
    ip -n "$ns" link set "$MACHINE_IFNAME" up || return 1
  done

  # Every machine reaches machine 0 and machine 0 reaches every machine (a few tries: the ports of
  # the bridge may take a moment to forward).
  local ok
  for ((k = 1; k < count; k++)); do
    ok=0
    for _ in 1 2 3 4 5; do
      if machine_reaches 0 "$k" && machine_reaches "$k" 0; then ok=1; break; fi
      sleep 0.2
    done
    if ((!ok)); then
      _machines_log "machine 0 (${MACHINE_ADDR[0]}) and machine $k (${MACHINE_ADDR[k]}) cannot reach each other"
      machines_describe >&2
      return 1
    fi
  done
  return 0
}

# machine_addr K: machine K's address.
machine_addr() { echo "${MACHINE_ADDR[$1]}"; }

# on_machine K CMD ARGS...: runs CMD (a program, not a shell function) inside machine K, with this
# script's environment.
on_machine() {
  local k=$1
  shift
  [[ -n ${MACHINE_NETNS[k]:-} ]] || { _machines_log "on_machine: no machine $k"; return 1; }
  # The run's lock stays with the run's own shell: neither CMD nor a subshell running this function
  # (`on_machine ... &`, `$(on_machine ...)`) keeps it once the test's shell has gone.
  if [[ -n $_MACHINES_LOCK_FD && $BASHPID != "$$" ]]; then
    exec {_MACHINES_LOCK_FD}>&-
    _MACHINES_LOCK_FD=""
  fi
  if [[ -n $_MACHINES_LOCK_FD ]]; then
    ip netns exec "${MACHINE_NETNS[k]}" "$@" {_MACHINES_LOCK_FD}>&-
  else
    ip netns exec "${MACHINE_NETNS[k]}" "$@"
  fi
}

# machine_pids K: the PIDs of the processes inside machine K, one a line.
machine_pids() { ip netns pids "${MACHINE_NETNS[$1]}" 2>/dev/null; }

# machine_reaches FROM TO [SECONDS]: whether machine FROM can open a TCP connection to machine TO's
# port 9 within SECONDS (default 2): a connection or a refusal (an RST from TO) both prove that TO
# answers; a timeout or "no route to host" (ARP got no answer) mean it does not.
machine_reaches() {
  local out rc
  out=$(on_machine "$1" timeout "${3:-2}" bash -c 'exec 3<>"/dev/tcp/$0/9"' "${MACHINE_ADDR[$2]}" 2>&1)
  rc=$?
  ((rc == 0)) && return 0
  [[ $out == *"Connection refused"* ]] && return 0
  return 1
}

# cut_link K: machine K is off the network, as with its cable pulled: its port on the switch goes
# down, so K's eth0 loses its carrier and keeps its address and routes; whatever either side sends is
# dropped, and open TCP connections see no reset (they time out).
cut_link() { ip -n "$_MACHINES_SWITCH" link set "p$1" down; }

# restore_link K: machine K back on the network.
restore_link() { ip -n "$_MACHINES_SWITCH" link set "p$1" up; }

# machines_now_ms: the wall clock in milliseconds.
machines_now_ms() {
  local t=${EPOCHREALTIME/[.,]/}
  echo $((t / 1000))
}

# machines_wait_jobs GRACE PID...: waits for background jobs of this shell (e.g. `on_machine K timeout
# ... acc-launch ... &`, whose $! is the subshell running on_machine, the parent of `timeout`). Once one of them has failed, the others get GRACE more seconds, then are
# sent SIGTERM (which `timeout` passes on), as one failed machine must not keep a test waiting for the
# others' hard timeouts. Sets JOB_RC[i] (exit status), JOB_END_MS[i] (when it was seen to end, 0.1 s
# resolution) and JOB_STOPPED[i] (1 if this function stopped it; SIGKILL 15 s after SIGTERM) for the
# i-th PID given.
machines_wait_jobs() {
  local grace_ms=$(($1 * 1000)) i left failed_ms=0 now
  shift
  local -a pids=("$@")
  JOB_RC=()
  JOB_END_MS=()
  JOB_STOPPED=()
  while :; do
    left=0
    now=$(machines_now_ms)
    for i in "${!pids[@]}"; do
      [[ -n ${JOB_END_MS[i]:-} ]] && continue
      if kill -0 "${pids[i]}" 2>/dev/null && [[ $(awk '{ print $3 }' "/proc/${pids[i]}/stat" 2>/dev/null) != Z ]]; then
        left=1
        continue
      fi
      wait "${pids[i]}"
      JOB_RC[i]=$?
      JOB_END_MS[i]=$now
      JOB_STOPPED[i]=${JOB_STOPPED[i]:-0}
      ((JOB_RC[i] != 0 && failed_ms == 0)) && failed_ms=$now
    done
    ((left)) || break
    if ((failed_ms > 0 && now - failed_ms > grace_ms)); then
      for i in "${!pids[@]}"; do
        [[ -n ${JOB_END_MS[i]:-} ]] && continue
        # The job (a subshell running on_machine) and its child (`timeout`, which passes SIGTERM on).
        if [[ -z ${JOB_STOPPED[i]:-} ]]; then
          JOB_STOPPED[i]=1
          # shellcheck disable=SC2046
          kill -TERM $(cat "/proc/${pids[i]}/task/${pids[i]}/children" 2>/dev/null) "${pids[i]}" 2>/dev/null
        elif ((now - failed_ms > grace_ms + 15000)); then
          # shellcheck disable=SC2046
          kill -KILL $(cat "/proc/${pids[i]}/task/${pids[i]}/children" 2>/dev/null) "${pids[i]}" 2>/dev/null
        fi
      done
    fi
    sleep 0.1
  done
}

# machines_describe: the namespaces, links and addresses (for a failure's log).
machines_describe() {
  local k
  echo "switch $_MACHINES_SWITCH:"
  ip -n "$_MACHINES_SWITCH" -br link 2>&1 | sed 's/^/  /'
  for ((k = 0; k < _MACHINES_COUNT; k++)); do
    echo "machine $k (${MACHINE_NETNS[k]}):"
    ip -n "${MACHINE_NETNS[k]}" -br addr 2>&1 | sed 's/^/  /'
  done
}

# machines_stop: kills every process inside the machines and the switch, then deletes the
# namespaces (which deletes their veths and the bridge). Safe to call twice.
machines_stop() {
  [[ -n $_MACHINES_TAG ]] || return 0
  local k
  for ((k = 0; k < _MACHINES_COUNT; k++)); do _machines_remove_netns "${MACHINE_NETNS[k]}"; done
  _machines_remove_netns "$_MACHINES_SWITCH"
  local left
  left=$(ip netns list 2>/dev/null | grep -E "^${_MACHINES_TAG}-")
  [[ -n $left ]] && _machines_log "namespaces left: $left"
  if [[ -n $_MACHINES_LOCK_FD ]]; then
    rm -f "$_MACHINES_LOCK"
    exec {_MACHINES_LOCK_FD}>&-
    _MACHINES_LOCK_FD=""
  fi
  _MACHINES_TAG=""
_MACHINES_LOCK=""
_MACHINES_LOCK_FD=""
  _MACHINES_COUNT=0
  MACHINE_ADDR=()
  MACHINE_NETNS=()
}
