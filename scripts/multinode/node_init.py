#!/usr/bin/python3
# node_init.py: PID 1 of one simulated node (scripts/ci-multinode.sh). A PID namespace's init
# must reap the orphans re-parented to it (a plain `sleep infinity` as PID 1 leaves zombies:
# orted's children, daemonized slurmd, tool daemons). It does nothing else.
#
# SIGTERM ends it; the kernel then SIGKILLs every process left in the node's PID namespace
# (orted, ranks, slurmd, slurmstepd, tool daemons): that is how `ci-multinode.sh down` empties
# a node. Bounded: one blocking wait() at a time, a 1 s nap while the node is empty.
import os
import signal
import time

signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal that ran `up` must not end the node
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(1)
    except InterruptedError:
        pass
