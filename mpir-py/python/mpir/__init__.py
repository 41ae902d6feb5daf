"""mpir: find every process of an MPI job, read their message queues and stacks, find deadlocks.

The Python bindings of mpir-rs. A :class:`Session` is made from a running starter
(:meth:`Session.attach`), a starter command (:meth:`Session.launch`), processes named by pid
(:meth:`Session.pids`) or core files (:meth:`Session.cores`). It gives the job's ranks
(:attr:`Session.ranks`), and reads the documented JSON documents as dicts: the job
(:meth:`Session.job`), every rank's message queues (:meth:`Session.queues`), their stacks
(:meth:`Session.stacks`) and the deadlock analysis (:meth:`Session.deadlock`). Ranks are
stopped only while they are read. Use it as a context manager: leaving the ``with`` block,
normally or by an exception, releases every rank (and stops a launched job)::

    import mpir

    with mpir.Session.launch([mpir.demo_starter(), "-n", "4"]) as session:
        for rank in session.ranks:
            print(rank.rank, rank.pid, rank.host)
        report = session.deadlock(samples=3, interval=0.1)
        print(report["cycles"])

Every error is an :class:`Error` (the library's message and its causes), a subclass saying
which step failed. A session belongs to the thread that made it.
"""

from __future__ import annotations

from . import _mpir
from ._errors import (
    AcquireError,
    AnalysisError,
    ControlError,
    CoreError,
    Error,
    NoSuchFile,
    NothingToRead,
    SessionClosed,
    UnsupportedError,
    WrongThread,
)
from ._session import PathArg, Session
from ._types import Frame, Operation, Rank

__version__: str = _mpir.__version__
"""The version of the bindings (the mpir-rs workspace's)."""


def demo_starter() -> str:
    """The path of the bundled demo job's starter, written out once (privately) and verified.

    The demo job needs no MPI: run ``[demo_starter(), "-n", "4"]`` (4 ranks by default) under
    :meth:`Session.launch`. Its ranks deadlock (0 -> 1 -> 2 -> 0, rank 3 blocked) and stay
    blocked until the job is stopped (closing the session does that).
    """
    path: str = _mpir.demo_starter()
    return path


def release_everything() -> None:
    """Lets go of every process this program holds, now, whichever session holds it.

    The way out for a session that cannot be closed: one Python collected on another thread
    than the one that made it (the bindings cannot drop it there, and say so on stderr).
    Every session of the program loses its ranks, so call it only when nothing is being read.
    The same happens by itself when the interpreter exits.
    """
    _mpir.release_everything()


__all__ = [
    "AcquireError",
    "AnalysisError",
    "ControlError",
    "CoreError",
    "Error",
    "Frame",
    "NoSuchFile",
    "NothingToRead",
    "Operation",
    "PathArg",
    "Rank",
    "Session",
    "SessionClosed",
    "UnsupportedError",
    "WrongThread",
    "__version__",
    "demo_starter",
    "release_everything",
]
