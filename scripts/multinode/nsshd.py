#!/usr/bin/python3
# nsshd.py: the simulated cluster's sshd (scripts/ci-multinode.sh), run in the HOST namespaces:
# only the host sees every node's init and can enter any node (`nsenter -t <init> -p -u -m`);
# from inside a node, a sibling node's PID namespace is out of reach (not in its /proc; setns()
# into a sibling PID namespace is EINVAL). usage: nsshd.py STATE_DIR
#
# Listens on STATE_DIR/run/nsshd.sock (mode 0600: root only). One request per connection:
#   client -> {"host": "node2", "cmd": "<shell command line>"} in ONE message carrying fds 0,1,2
#   server    runs `nsenter -t <node init> -p -u -m --wd=/root -- /bin/sh -c CMD` in a session of
#             its own, with the client's fds and a minimal login-like environment
#   client -> "SIG <n>\n": that signal to the remote process group
#   client EOF (nsrsh died): SIGHUP to the remote process group, like sshd
#   server -> "EXIT <code>\n" (128+signal if killed) or "ERR <text>\n"
# A node is found through STATE_DIR/run/<node>.pid ("<host pid> <start time>"), and used only
# while that process still has that start time (a recycled pid is never entered); a host name
# that is an alias (STATE_DIR/hosts: on the line of nodeI) reaches nodeI.
# Log: one line per connection and exit on stdout (ci-multinode.sh sends it to run/nsshd.log).
import json
import os
import signal
import socket
import subprocess
import sys
import threading

STATE = sys.argv[1]
SOCK = os.path.join(STATE, "run", "nsshd.sock")
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
       "USER": "root", "LOGNAME": "root", "SHELL": "/bin/sh", "LANG": "C.UTF-8"}
MAX_REQUEST = 1 << 20


def log(*a):
    print(*a, flush=True)


def start_time(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks


def is_node(name):
    return name.startswith("node") and name[4:].isdigit()


def node_of(name):
    """The node (nodeI) that answers to host name `name`: itself, or the node named on the
    line of the cluster's hosts file that lists `name` as an alias (MPIR_MULTINODE_ALIASES)."""
    if is_node(name):
        return name
    try:
        with open(os.path.join(STATE, "hosts")) as f:
            for line in f:
                names = line.split("#")[0].split()[1:]
                if name in names:
                    return next((n for n in names if is_node(n)), None)
    except OSError:
        pass
    return None


def node_pid(host):
    name = node_of(host.split("@")[-1].split(".")[0])  # user@node2.cluster -> node2
    if name is None:
        return None
    try:
        with open(os.path.join(STATE, "run", name + ".pid")) as f:
            pid, started = f.read().split()[:2]
        return int(pid) if start_time(int(pid)) == started else None
    except (OSError, ValueError):
        return None


def serve(conn):
    fds = []
    try:
        conn.settimeout(10)
        msg, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 3)
        conn.settimeout(None)
        req = json.loads(msg.decode())
        pid = node_pid(str(req["host"]))
        if pid is None or len(fds) != 3:
            conn.sendall(b"ERR unknown host %s\n" % str(req["host"]).encode())
            return
        argv = ["nsenter", "-t", str(pid), "-p", "-u", "-m", "--wd=/root", "--",
                "/bin/sh", "-c", str(req["cmd"])]
        p = subprocess.Popen(argv, stdin=fds[0], stdout=fds[1], stderr=fds[2], env=ENV,
                             start_new_session=True, close_fds=True)
        for fd in fds:
            os.close(fd)
        fds = []
        log("conn: host=%s nsenter-pid=%d cmd=%.300s" % (req["host"], p.pid, req["cmd"]))

        def reader():  # signals from nsrsh; its EOF = a dropped connection
            buf = b""
            while True:
                try:
                    d = conn.recv(4096)
                except OSError:
                    d = b""
                if not d:
                    if p.poll() is None:
                        try:
                            os.killpg(p.pid, signal.SIGHUP)
                        except ProcessLookupError:
                            pass
                    return
                buf = (buf + d)[-4096:]
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.startswith(b"SIG "):
                        try:
                            os.killpg(p.pid, int(line[4:]))
                        except (ProcessLookupError, ValueError):
                            pass

        threading.Thread(target=reader, daemon=True).start()
        rc = p.wait()
        code = rc if rc >= 0 else 128 - rc
        log("exit: nsenter-pid=%d code=%d" % (p.pid, code))
        try:
            conn.sendall(b"EXIT %d\n" % code)
        except OSError:
            pass
    except Exception as e:  # noqa: BLE001 - any bad request ends only its own connection
        try:
            conn.sendall(b"ERR %s\n" % str(e).encode(errors="replace")[:200])
        except OSError:
            pass
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def main():
    try:
        os.unlink(SOCK)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    s.bind(SOCK)
    os.umask(old)
    s.listen(512)  # a tree of agents connects hundreds at once

    def stop(*_):
        try:
            os.unlink(SOCK)
        except OSError:
            pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log("nsshd listening on", SOCK)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


main()
