#!/usr/bin/env bash
# ci-multinode.sh — a simulated multi-node cluster on this one machine, for the tests of jobs
# whose ranks run on other nodes than the tool (issue 21). Needs root and util-linux.
#
# Usage: scripts/ci-multinode.sh [up]   start (nothing to do if it is already up and healthy)
#        scripts/ci-multinode.sh down   stop everything it started (by recorded pid + start time)
#        scripts/ci-multinode.sh status say what runs; exit 0 only if all of it does
#   The LAST line on stdout of `up` and `status` is the state directory (export it as
#   MPIR_MULTINODE for the tests: mpir_acquire::testkit::multinode):
#       MPIR_MULTINODE=$(scripts/ci-multinode.sh up | tail -n1); export MPIR_MULTINODE
#   Progress goes to stderr. Settings (environment):
#       MPIR_MULTINODE_DIR        state directory, default ${TMPDIR:-/tmp}/mpir-rs-mn
#       MPIR_MULTINODE_NODES      number of nodes N (2..254), default 4 (each node costs ~4 MB;
#                                 for many nodes set MPIR_MULTINODE_SLURM=0: one slurmd per node)
#       MPIR_MULTINODE_SLURM      1 (default): Slurm on node2..N; 0: no Slurm
#       MPIR_MULTINODE_ALIASES    host names per node M (1..64), default 1: node I also answers
#                                 to nodeIa1..nodeIa<M-1>, aliases on its /etc/hosts line (the
#                                 line that names a node's host name lists what the node is; one
#                                 agent per name: many "hosts" for the price of one node)
#       MPIR_MULTINODE_SLURM_PORT slurmctld's port, default 7817 (slurmd: +1; node i: +10+i),
#                                 away from scripts/ci-slurm.sh's 6817/6818: both run in one CI run
#
# What it simulates. Nodes node1..N, each a set of Linux namespaces: PID (its own pids, a
# reaping PID 1: multinode/node_init.py), UTS (hostname nodeI) and mount (its own /proc; the
# state directory's hosts file bind-mounted on /etc/hosts, mapping nodeI to 127.0.1.I; with
# Slurm, the state directory's etc-slurm/ on /etc/slurm). The host's network namespace and
# file systems are shared: all traffic is on loopback addresses, no network namespace and no
# address is ever created. An ssh stand-in reaches any node from any node: multinode/nsrsh
# (Open MPI: `--mca plm_rsh_agent $MPIR_MULTINODE/bin/nsrsh`) hands its command and its stdio
# (fd passing) to multinode/nsshd.py, which runs on the host and enters the node. Slurm: a
# private munged and slurmctld on the host, one slurmd per node2..N inside that node (node1 is
# the front end, without slurmd), per-node TmpFS.
#
# Tests use it through mpir_acquire::testkit::multinode::Cluster (one test at a time: a lock on
# run/tests.lock), running the tool side inside node1; a process of node1 can be given a chosen
# node-local pid (the node's /proc/sys/kernel/ns_last_pid) to collide with a remote rank's.
#
# What it does not simulate: separate networks or file systems (every node sees the same /tmp
# and the same files, so a "shared file system" is always there), separate users, resource
# limits, node failure; `/proc` of the host still shows every node's processes under host pids.
#
# Traps (measured: docs/launchers.md, "Simulated multi-node cluster"):
#   - a pid means something only on its node: node2's rank 39 and node3's rank 39 are two
#     processes, and node1's pid 39 is a third, unrelated one (gdb -p 39 from node1 attaches to it);
#   - node names must resolve to distinct addresses (127.0.1.I): on 127.0.0.1 orterun thinks
#     every node is itself and runs all ranks locally;
#   - Open MPI picks eth0 unless told `--mca oob_tcp_if_include lo --mca btl_tcp_if_include lo`;
#   - `nsenter` from inside a node cannot reach a sibling node (hence nsshd on the host); from
#     the host always enter with -p and -m together (`nsenter -t <init> -p -u -m`): -m alone
#     gives a /proc in which /proc/self is missing;
#   - Slurm's mpi/pmix needs a per-node TmpFS on a shared /tmp (EEXIST on the second node);
#   - srun and Slurm clients read SLURM_CONF before /etc/slurm: set it to this cluster's file
#     (etc-slurm/slurm.conf) where the single-node CI Slurm's is exported.
#
# Safe to rerun: only processes recorded in run/*.pid ("pid start-time") whose start time still
# matches are signalled; ending a node's init makes the kernel kill everything in that node.
set -Eeuo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=$(realpath -m "${MPIR_MULTINODE_DIR:-${TMPDIR:-/tmp}/mpir-rs-mn}")
N=${MPIR_MULTINODE_NODES:-4}
WANT_SLURM=${MPIR_MULTINODE_SLURM:-1}
ALIASES=${MPIR_MULTINODE_ALIASES:-1}
CTLD_PORT=${MPIR_MULTINODE_SLURM_PORT:-7817}
RUN=$DIR/run
CONF=$DIR/etc-slurm/slurm.conf
MUNGE_DIR=$DIR/munge
PYTHON=$(readlink -f /usr/bin/python3 2>/dev/null || echo /usr/bin/python3)

log() { printf 'ci-multinode: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 2 ] && [ "$N" -le 254 ] || die "MPIR_MULTINODE_NODES=$N: want 2..254 (node I is 127.0.1.I)"
[[ $ALIASES =~ ^[0-9]+$ ]] && [ "$ALIASES" -ge 1 ] && [ "$ALIASES" -le 64 ] || die "MPIR_MULTINODE_ALIASES=$ALIASES: want 1..64"
[[ $CTLD_PORT =~ ^[0-9]+$ ]] || die "MPIR_MULTINODE_SLURM_PORT=$CTLD_PORT: not a port"

# Field 22 of /proc/PID/stat: the start time (clock ticks since boot); empty if gone.
start_time() { { cut -d')' -f2- "/proc/$1/stat" 2>/dev/null || true; } | awk '{print $20}'; }

# Records process $2 in pid file $1 as "pid start-time".
record() {
    local st
    st=$(start_time "$2")
    [ -n "$st" ] || return 1
    echo "$2 $st" >"$1.tmp" && mv "$1.tmp" "$1"
}

# The pid recorded in $1 if that process still runs with the recorded start time.
live() {
    local pid st
    [ -s "$1" ] || return 1
    read -r pid st _ <"$1" || true
    [[ $pid =~ ^[0-9]+$ ]] && [ -n "$st" ] && [ "$(start_time "$pid")" = "$st" ] || return 1
    echo "$pid"
}

# Stops the processes recorded in pid files "$@": SIGTERM to all, up to 5 s, SIGKILL to those
# left; the files are removed.
stop_all() {
    local f pid i left
    for f in "$@"; do
        pid=$(live "$f") || continue
        log "stopping $(basename "$f" .pid) (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
    done
    for i in $(seq 50); do
        left=0
        for f in "$@"; do live "$f" >/dev/null && left=1; done
        [ $left = 0 ] && break
        sleep 0.1
    done
    for f in "$@"; do
        if pid=$(live "$f"); then
            log "$(basename "$f" .pid) (pid $pid) ignored SIGTERM for 5 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done
}

# The daemon's own pid file $1 names a live process running executable $2 whose command line
# names this state directory: re-records it in $3 (the daemons fork after writing some of their
# pid files, so what was read right after their start may be the parent's pid).
adopt_daemon() {
    local pid
    [ -s "$1" ] || return 0
    pid=$(head -c 32 "$1" | tr -dc 0-9)
    [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$2")" ] || return 0
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$DIR/" || return 0
    record "$3" "$pid" || true
}

# Up to 5 s for a daemon that forks into the background to name itself in its pid file $1.
wait_daemon() {
    local i
    for i in $(seq 50); do
        adopt_daemon "$@"
        live "$3" >/dev/null && return 0
        sleep 0.1
    done
    return 1
}

have_slurm() { [ "$WANT_SLURM" = 1 ] && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && [ -x /usr/sbin/munged ]; }

# Everything the configuration asks for runs: 0, else 1 (what is missing on stderr).
healthy() {
    local i ok=0 idle
    [ -s "$RUN/config" ] && [ "$(cat "$RUN/config")" = "$(config_line)" ] || { log "not started with this configuration"; return 1; }
    for i in $(seq "$N"); do live "$RUN/node$i.pid" >/dev/null || { log "node$i: down"; ok=1; }; done
    live "$RUN/nsshd.pid" >/dev/null && [ -S "$RUN/nsshd.sock" ] || { log "nsshd: down"; ok=1; }
    if [ -s "$RUN/slurm" ]; then
        live "$RUN/munged.pid" >/dev/null || { log "munged: down"; ok=1; }
        live "$RUN/slurmctld.pid" >/dev/null || { log "slurmctld: down"; ok=1; }
        if [ $ok = 0 ]; then
            idle=$(SLURM_CONF=$CONF timeout -s KILL 5 sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 ~ /^(idle|mixed|allocated)/' | wc -l || true)
            [ "$idle" = $((N - 1)) ] || { log "slurm: $idle of $((N - 1)) nodes up"; ok=1; }
        fi
    fi
    return $ok
}

config_line() { echo "nodes=$N slurm=$(have_slurm && echo "$CTLD_PORT" || echo no)$([ "$ALIASES" = 1 ] || echo " aliases=$ALIASES")"; }

down() {
    [ -d "$RUN" ] || return 0
    if live "$RUN/slurmctld.pid" >/dev/null && [ -s "$CONF" ]; then
        # This cluster's jobs only (its own SLURM_CONF).
        SLURM_CONF=$CONF timeout -s KILL 10 scancel --quiet --user "$(id -un)" 2>/dev/null || true
    fi
    adopt_daemon "$DIR/slurm/slurmctld.pid" /usr/sbin/slurmctld "$RUN/slurmctld.pid"
    adopt_daemon "$MUNGE_DIR/munged.pid" /usr/sbin/munged "$RUN/munged.pid"
    # A node's init ends → the kernel kills every process of that node (orted, ranks, slurmd…).
    stop_all "$RUN"/node*.pid "$RUN/nsshd.pid" "$RUN/slurmctld.pid" "$RUN/munged.pid"
    rm -f "$RUN/nsshd.sock" "$RUN/config" "$RUN/slurm"
}

start_node() {
    local i=$1 u c t mounts
    mounts="mount --bind $DIR/hosts /etc/hosts"
    [ -d "$DIR/etc-slurm" ] && [ -d /etc/slurm ] && mounts="$mounts && mount --bind $DIR/etc-slurm /etc/slurm"
    # --mount-proc: the node's own /proc; --propagation private: its mounts stay its own.
    setsid unshare --pid --uts --mount --fork --mount-proc --propagation private \
        /bin/sh -c "hostname node$i && $mounts && exec /usr/bin/python3 $DIR/bin/node_init.py" \
        </dev/null >"$DIR/log/node$i.log" 2>&1 &
    u=$!
    c=""
    for t in $(seq 50); do
        c=$(tr -dc '0-9' <"/proc/$u/task/$u/children" 2>/dev/null || true)
        # The init once the shell has exec'd it (the shell's own command line names
        # node_init.py too, before it has set the host name).
        [ -n "$c" ] && [ "$(readlink "/proc/$c/exe" 2>/dev/null)" = "$PYTHON" ] &&
            grep -q node_init "/proc/$c/cmdline" 2>/dev/null && break
        c=""
        sleep 0.1
    done
    [ -n "$c" ] || die "node$i did not start within 5 s; see $DIR/log/node$i.log"
    record "$RUN/node$i.pid" "$c" || die "node$i's init (pid $c) vanished; see $DIR/log/node$i.log"
    [ "$(nsenter -t "$c" -u hostname)" = "node$i" ] || die "node$i: wrong host name"
}

start_slurm() {
    # shellcheck source=lib/apt.sh
    source "$HERE/lib/apt.sh"
    local key=/etc/munge/munge.key i host pid
    mkdir -p "$MUNGE_DIR" "$DIR/slurm/state"
    chown munge:munge "$MUNGE_DIR"
    chmod 0755 "$DIR" "$MUNGE_DIR"
    if [ ! -s "$key" ]; then
        log "creating $key"
        install -d -o munge -g munge -m 0700 /etc/munge
        (umask 077 && head -c 1024 /dev/urandom >"$key")
        chown munge:munge "$key"
        chmod 0400 "$key"
    fi
    # A private munged: a shared one can be stopped by anyone else on the machine.
    runuser -u munge -- /usr/sbin/munged --socket="$MUNGE_DIR/munge.socket" --key-file="$key" \
        --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
        --seed-file="$MUNGE_DIR/munged.seed" || die "munged did not start; see $MUNGE_DIR/munged.log"
    wait_daemon "$MUNGE_DIR/munged.pid" /usr/sbin/munged "$RUN/munged.pid" || die "munged exited; see $MUNGE_DIR/munged.log"
    host=$(hostname -s)
    [[ $host =~ ^[A-Za-z0-9._-]+$ ]] || die "unusable host name: $host"
    {
        cat <<CONF
# Rendered by scripts/ci-multinode.sh: slurmctld on the host, slurmd in node2..node$N.
ClusterName=mpirmn
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_DIR/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/slurm/state
SlurmdSpoolDir=$DIR/slurm/spool.%n
# Per node: mpi/pmix creates <TmpFS>/spmix_appdir_<uid>_<job>.<step> (EEXIST on a shared /tmp).
TmpFS=$DIR/slurm/tmp.%n
SlurmctldPidFile=$DIR/slurm/slurmctld.pid
# slurmd pid files hold node-local pids.
SlurmdPidFile=$DIR/slurm/slurmd.%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.%n.log
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
CONF
        for i in $(seq 2 "$N"); do
            echo "NodeName=node$i NodeAddr=127.0.1.$i Port=$((CTLD_PORT + 10 + i)) CPUs=4 State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=node[2-$N] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
    } >"$CONF"
    log "slurmctld (port $CTLD_PORT) on the host"
    SLURM_CONF=$CONF /usr/sbin/slurmctld -c -f "$CONF" || die "slurmctld did not start; see $DIR/log/slurmctld.log"
    wait_daemon "$DIR/slurm/slurmctld.pid" /usr/sbin/slurmctld "$RUN/slurmctld.pid" ||
        die "slurmctld exited; see $DIR/log/slurmctld.log (port $CTLD_PORT taken?)"
    for i in $(seq 2 "$N"); do
        mkdir -p "$DIR/slurm/spool.node$i" "$DIR/slurm/tmp.node$i"
        pid=$(live "$RUN/node$i.pid")
        # Daemonizes inside node$i; finds its NodeName from the node's host name.
        nsenter -t "$pid" -p -u -m -- /usr/sbin/slurmd -f "$CONF" || die "slurmd in node$i did not start; see $DIR/log/slurmd.node$i.log"
    done
    echo "$CTLD_PORT" >"$RUN/slurm"
}

up() {
    [ "$(id -u)" -eq 0 ] || die "not root: namespaces and the daemons need root"
    command -v unshare >/dev/null && command -v nsenter >/dev/null || die "util-linux's unshare/nsenter missing"
    [ -x /usr/bin/python3 ] || die "no /usr/bin/python3 (the nodes' init and the ssh stand-in are Python)"
    if healthy 2>/dev/null; then
        log "already up"
        echo "$DIR"
        return 0
    fi
    down
    mkdir -p "$RUN" "$DIR/bin" "$DIR/log" "$DIR/out"
    chmod 0755 "$DIR"
    install -m 0755 "$HERE/multinode/node_init.py" "$HERE/multinode/nsshd.py" "$HERE/multinode/nsrsh" "$DIR/bin/"
    local i a
    { grep -v -E '[[:space:]]node[0-9]+([[:space:]]|$)' /etc/hosts || true
      for i in $(seq "$N"); do
          printf '127.0.1.%s node%s' "$i" "$i"
          for a in $(seq $((ALIASES - 1))); do printf ' node%sa%s' "$i" "$a"; done
          echo
      done; } >"$DIR/hosts"
    rm -rf "$DIR/etc-slurm" "$DIR/slurm"
    if have_slurm; then
        # The nodes see this directory on /etc/slurm: the host's own files, plus our slurm.conf.
        mkdir -p "$DIR/etc-slurm"
        [ -d /etc/slurm ] && cp -a /etc/slurm/. "$DIR/etc-slurm/"
        : >"$CONF"
    fi
    for i in $(seq "$N"); do start_node "$i"; done
    setsid /usr/bin/python3 "$DIR/bin/nsshd.py" "$DIR" </dev/null >"$DIR/log/nsshd.log" 2>&1 &
    record "$RUN/nsshd.pid" $! || die "nsshd exited; see $DIR/log/nsshd.log"
    for i in $(seq 50); do [ -S "$RUN/nsshd.sock" ] && break; sleep 0.1; done
    [ -S "$RUN/nsshd.sock" ] || die "nsshd did not listen within 5 s; see $DIR/log/nsshd.log"
    have_slurm && start_slurm
    config_line >"$RUN/config"
    for i in $(seq 100); do
        healthy 2>/dev/null && break
        sleep 0.2
    done
    healthy || die "not healthy within 20 s; logs in $DIR/log"
    if [ -s "$RUN/slurm" ]; then
        adopt_daemon "$DIR/slurm/slurmctld.pid" /usr/sbin/slurmctld "$RUN/slurmctld.pid"
        adopt_daemon "$MUNGE_DIR/munged.pid" /usr/sbin/munged "$RUN/munged.pid"
    fi
    # The proof that matters: node1 reaches node2 through nsrsh, which sees its own host name.
    local got
    got=$(timeout -s KILL 10 nsenter -t "$(live "$RUN/node1.pid")" -p -u -m -- "$DIR/bin/nsrsh" node2 hostname </dev/null) ||
        die "nsrsh from node1 to node2 failed; see $DIR/log/nsshd.log"
    [ "$got" = node2 ] || die "nsrsh node2 hostname said $got"
    log "up: node1..node$N$([ -s "$RUN/slurm" ] && echo ", Slurm on node2..node$N (port $CTLD_PORT)") in $DIR"
    echo "$DIR"
}

status() {
    local i p
    for i in $(seq "$N"); do
        p=$(live "$RUN/node$i.pid") && log "node$i: init host pid $p" || log "node$i: down"
    done
    if healthy; then
        log "healthy"
        echo "$DIR"
    else
        echo "$DIR"
        return 1
    fi
}

case ${1:-up} in
up | start) up ;;
down | stop) down ;;
status) status ;;
*) die "usage: $0 [up|down|status]" ;;
esac
