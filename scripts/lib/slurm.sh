# Slurm across the nodes of the one-machine cluster (scripts/cluster), sourced by
# scripts/cluster-test (on this machine) and scripts/cluster-rdma-test (in the soft-RoCE VM):
#
#   slurm_up     munged on this machine (its socket reaches every node: unix sockets ignore
#                network namespaces), slurmctld on the head, one slurmd per node with its own
#                NodeName/NodeAddr; waits until sinfo from the head shows both nodes idle.
#                Exports SLURM_CONF. Returns 0 when up, 1 on a failure, 2 when Slurm cannot run
#                here at all (binaries or munge's key missing and not installable, as in the VM,
#                whose root is this machine's, read-only); the reason is in $slurm_skip.
#   slurm_down   cancels every job, stops slurmctld, the slurmds (by their pid files) and munged,
#                each within a bound, and removes Slurm's folder (and the cgroups slurmd made
#                under a slice slurm_up made); returns 1 if something is left.
#
# With `scripts/cluster up --rdma` the nodes share one network namespace: each slurmd then
# listens on a port of its own (6818 for node1, 6819 for node2). SLURM_UP_TIMEOUT (default 60 s)
# bounds the wait for the nodes to be idle; the VM is emulated and slow and sets more.
# The caller defines say().

slurm_dir=/run/viaduct-cluster/slurm
munged_pid=
slurm_skip=
slurm_cgroup=

slurm_up() {
  slurm_skip=
  if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
     ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
    if [ ! -w /usr ]; then
      slurm_skip="slurmctld, slurmd, srun or munged is missing and / is read-only here (install slurm-wlm and munge on the host)"
      return 2
    fi
    say "installing slurm-wlm and munge"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) >/dev/null ||
      { say "FAILED: cannot install slurm-wlm and munge"; return 1; }
  fi
  local d=$slurm_dir key=/etc/munge/munge.key
  mkdir -p "$d/munge" "$d/state" "$d/spool-node1" "$d/spool-node2"
  if [ ! -s "$key" ]; then
    if [ ! -w /etc ]; then slurm_skip="no munge key $key and / is read-only here"; return 2; fi
    mungekey -c -k "$key" || { say "FAILED: mungekey -c -k $key"; return 1; }
  fi
  # The key must be munge's and private; on a read-only root (the VM) it already is.
  [ "$(stat -c %U "$key")" = munge ] || chown munge:munge "$key"
  [ "$(stat -c %a "$key")" = 600 ] || chmod 600 "$key"
  chown munge:munge "$d/munge"; chmod 755 "$d" "$d/munge"
  local sock="$d/munge/munge.socket"
  setpriv --reuid=munge --regid=munge --init-groups munged --foreground --key-file="$key" \
    --socket="$sock" --pid-file="$d/munge/munged.pid" --log-file="$d/munge/munged.log" \
    --seed-file="$d/munge/munged.seed" >"$d/munge/munged.out" 2>&1 &
  munged_pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; kill -0 "$munged_pid" 2>/dev/null || break; sleep 0.1; done
  if [ ! -S "$sock" ]; then
    say "FAILED: munged did not create its socket within 10 s: $(tail -n 3 "$d/munge/munged.out" "$d/munge/munged.log" 2>/dev/null | tr '\n' ' ')"
    return 1
  fi
  # One network namespace for all nodes (--rdma): a port per slurmd.
  local port1=6818 port2=6818
  [ "$(cat /run/viaduct-cluster/mode 2>/dev/null)" = rdma ] && port2=6819
  local conf="$d/slurm.conf"
  cat >"$conf" <<CONF
ClusterName=viaduct
SlurmctldHost=head(192.0.2.1)
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool-%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=pmi2
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
# A node whose slurmd stops answering is declared down after 10 s (default 300 s), so that a
# job on a dead node ends within a bound (scripts/cluster-slurm-faults).
SlurmdTimeout=10
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=node1 NodeAddr=192.0.2.11 Port=$port1 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=node2 NodeAddr=192.0.2.12 Port=$port2 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
  # slurmd sets up cgroups even with proctrack/linuxproc. Under cgroup v2 without systemd (the
  # VM) it would ask systemd over dbus for the step daemons' scope and give up: it makes the
  # hierarchy itself instead (cgroup.conf beside slurm.conf). Elsewhere nothing changes.
  # Each slurmd makes system.slice/NODE_slurmstepd.scope; the slice is made here if absent
  # (and removed by slurm_down).
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] && [ ! -S /run/dbus/system_bus_socket ]; then
    printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' >"$d/cgroup.conf"
    if [ ! -d /sys/fs/cgroup/system.slice ]; then
      mkdir /sys/fs/cgroup/system.slice || { say "FAILED: cannot make /sys/fs/cgroup/system.slice"; return 1; }
      slurm_cgroup=/sys/fs/cgroup/system.slice
    fi
  fi
  export SLURM_CONF="$conf"
  scripts/cluster exec head -- slurmctld -D -c -f "$conf" >>"$d/slurmctld.out" 2>&1 &
  disown "$!"
  for n in node1 node2; do
    scripts/cluster exec "$n" -- slurmd -D -N "$n" -f "$conf" >>"$d/slurmd-$n.out" 2>&1 &
    # (Not this shell's job: the fault checks kill it, which bash would report as an error.)
    disown "$!"
  done
  local state= bound=${SLURM_UP_TIMEOUT:-60} t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$bound" ]; do
    state=$(timeout 5 scripts/cluster exec head -- sinfo -h -o '%n=%t' 2>/dev/null | sort | tr '\n' ' ')
    [ "$state" = "node1=idle node2=idle " ] && break
    sleep 0.5
  done
  if [ "$state" != "node1=idle node2=idle " ]; then
    say "FAILED: the nodes are not idle after $bound s (sinfo from the head says: '${state:-nothing}'); daemon logs:"
    tail -n 15 "$d"/slurmctld.log "$d"/slurmd-node*.log "$d"/slurmctld.out "$d"/slurmd-node*.out 2>/dev/null
    return 1
  fi
  say "slurm: node1 and node2 idle"
}

# Ends the processes PIDS (TERM, then KILL after 5 s); returns 1 if one is still there.
slurm_stop_pids() {
  local p alive
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for _ in $(seq 50); do
    alive=
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && return 0
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null
  sleep 0.5
  for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done
  return 0
}

slurm_down() {
  local d=$slurm_dir pids= f p rc=0 t0=$SECONDS
  if [ -n "${SLURM_CONF:-}" ] && [ -e "$SLURM_CONF" ] && [ -e /run/viaduct-cluster/head.pid ]; then
    timeout 10 scripts/cluster exec head -- scancel --quiet --user=root 2>/dev/null
  fi
  for f in "$d"/slurmctld.pid "$d"/slurmd-*.pid; do
    [ -s "$f" ] || continue
    p=$(cat "$f")
    # Only a Slurm daemon (a pid file outlives its process; its number may be reused).
    case "$(cat "/proc/$p/comm" 2>/dev/null)" in slurmctld|slurmd) pids="$pids $p" ;; esac
  done
  # shellcheck disable=SC2086
  slurm_stop_pids $pids || { say "FAILED: Slurm daemons left after KILL:$pids"; rc=1; }
  if [ -n "$munged_pid" ]; then
    slurm_stop_pids "$munged_pid" || { say "FAILED: munged ($munged_pid) left after KILL"; rc=1; }
    wait "$munged_pid" 2>/dev/null
    munged_pid=
  fi
  # The cgroups slurmd made under a slice made by slurm_up, innermost first (empty now).
  if [ -n "$slurm_cgroup" ] && [ -d "$slurm_cgroup" ]; then
    find "$slurm_cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
    if [ -d "$slurm_cgroup" ]; then say "FAILED: cgroups left under $slurm_cgroup"; rc=1; else slurm_cgroup=; fi
  fi
  [ -e "$d" ] && say "slurm: down in $((SECONDS - t0)) s"
  rm -rf "$d"
  return "$rc"
}
