#!/usr/bin/env bash
# ci-slurm.sh — a single-node Slurm (Debian slurm-wlm 22.05) for the tests of `srun` jobs:
# a private munged (its own socket, key /etc/munge/munge.key), slurmctld and slurmd, all with
# their state, pid files and logs in one scratch directory, configured from
# scripts/slurm/slurm.conf.in rendered with this host's short name.
#
# Usage: scripts/ci-slurm.sh [start]   start (stopping first whatever a previous run started)
#        scripts/ci-slurm.sh stop      cancel the jobs, stop the daemons (by their pid files)
#   The scratch directory is $MPIR_SLURM_DIR, default ${TMPDIR:-/tmp}/mpir-rs-slurm; the
#   ports are $MPIR_SLURM_PORT (slurmctld, default 6817) and that + 1 (slurmd).
#   Progress goes to stderr; the LAST line on stdout of `start` is the rendered slurm.conf:
#       SLURM_CONF=$(scripts/ci-slurm.sh | tail -n1); export SLURM_CONF
#   Slurm's own clients (srun, sinfo, squeue, scontrol, scancel) read $SLURM_CONF.
#
# Safe to rerun: only processes named in this directory's pid files, whose executable is the
# expected daemon, are stopped; the state is cleared at each start (slurmctld -c). Needs root
# (the daemons run as root, munged as user munge); installs slurm-wlm and munge when missing.
set -Eeuo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${MPIR_SLURM_DIR:-${TMPDIR:-/tmp}/mpir-rs-slurm}
CTLD_PORT=${MPIR_SLURM_PORT:-6817}
SLURMD_PORT=$((CTLD_PORT + 1))
MUNGE_DIR=$DIR/munge
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
CONF=$DIR/slurm.conf

log() { printf 'ci-slurm: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The pid in file $1 if that process is alive and runs executable $2.
live_pid() {
    local pid exe
    [ -s "$1" ] || return 1
    pid=$(head -c 32 "$1" | tr -dc 0-9)
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    # Debian installs the daemons through alternatives (slurmctld -> slurmctld-wlm).
    [ "$exe" = "$(readlink -f "$2")" ] || return 1
    echo "$pid"
}

# Stop the process of pid file $1 (executable $2): SIGTERM, up to 5 s, then SIGKILL.
stop_one() {
    local pid i
    pid=$(live_pid "$1" "$2") || { rm -f "$1"; return 0; }
    log "stopping $(basename "$2") (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do
        [ -d "/proc/$pid" ] || break
        sleep 0.1
    done
    if [ -d "/proc/$pid" ]; then
        log "$(basename "$2") (pid $pid) ignored SIGTERM for 5 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$1"
}

stop() {
    if [ -s "$CONF" ] && live_pid "$DIR/slurmctld.pid" /usr/sbin/slurmctld >/dev/null; then
        # Jobs of this cluster only (its own SLURM_CONF): their steps' slurmstepd outlive slurmd.
        SLURM_CONF=$CONF timeout -s KILL 10 scancel --quiet --user "$(id -un)" 2>/dev/null || true
        sleep 0.5
    fi
    stop_one "$DIR/slurmd.pid" /usr/sbin/slurmd
    stop_one "$DIR/slurmctld.pid" /usr/sbin/slurmctld
    stop_one "$MUNGE_DIR/munged.pid" /usr/sbin/munged
}

start() {
    [ "$(id -u)" -eq 0 ] || die "not root: the single-node Slurm runs its daemons as root"
    # shellcheck source=lib/apt.sh
    source "$HERE/lib/apt.sh"
    ensure_packages slurm-wlm munge
    stop
    rm -rf "$DIR/state" "$DIR/spool"
    mkdir -p "$DIR/state" "$DIR/spool" "$MUNGE_DIR"
    chmod 0755 "$DIR"
    chown munge:munge "$MUNGE_DIR"
    chmod 0755 "$MUNGE_DIR"
    local key=/etc/munge/munge.key
    if [ ! -s "$key" ]; then
        log "creating $key"
        install -d -o munge -g munge -m 0700 /etc/munge
        (umask 077 && head -c 1024 /dev/urandom >"$key")
        chown munge:munge "$key"
        chmod 0400 "$key"
    fi
    log "munged on $MUNGE_SOCKET"
    runuser -u munge -- /usr/sbin/munged --socket="$MUNGE_SOCKET" --key-file="$key" \
        --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
        --seed-file="$MUNGE_DIR/munged.seed" ||
        die "munged did not start; see $MUNGE_DIR/munged.log"
    timeout -s KILL 10 munge --socket="$MUNGE_SOCKET" -n </dev/null |
        timeout -s KILL 10 unmunge --socket="$MUNGE_SOCKET" >/dev/null ||
        die "munge credentials do not round-trip on $MUNGE_SOCKET"

    local host
    host=$(hostname -s)
    [[ $host =~ ^[A-Za-z0-9._-]+$ ]] || die "unusable host name: $host"
    sed -e "s|@HOST@|$host|g" -e "s|@DIR@|$DIR|g" -e "s|@MUNGE_SOCKET@|$MUNGE_SOCKET|g" \
        -e "s|@CTLD_PORT@|$CTLD_PORT|g" -e "s|@SLURMD_PORT@|$SLURMD_PORT|g" \
        "$HERE/slurm/slurm.conf.in" >"$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
    export SLURM_CONF=$CONF
    log "slurmctld and slurmd for $host ($CONF)"
    /usr/sbin/slurmctld -c -f "$CONF" || die "slurmctld did not start; see $DIR/slurmctld.log"
    /usr/sbin/slurmd -f "$CONF" || die "slurmd did not start; see $DIR/slurmd.log"
    local i
    for i in $(seq 75); do
        live_pid "$DIR/slurmctld.pid" /usr/sbin/slurmctld >/dev/null ||
            die "slurmctld exited; see $DIR/slurmctld.log (port $CTLD_PORT taken by another Slurm?)"
        if live_pid "$DIR/slurmd.pid" /usr/sbin/slurmd >/dev/null &&
            timeout -s KILL 5 sinfo -h -o %T 2>/dev/null | grep -qx idle; then
            log "up: $(timeout -s KILL 5 sinfo -h 2>/dev/null || true)"
            echo "$CONF"
            return 0
        fi
        sleep 0.2
    done
    die "the node did not become idle within 15 s; see $DIR/slurmctld.log and $DIR/slurmd.log"
}

case ${1:-start} in
start) start ;;
stop) stop ;;
*) die "usage: $0 [start|stop]" ;;
esac
