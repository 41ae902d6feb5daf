"""The :class:`Session` class: a context manager around the library's session."""

from __future__ import annotations

import json
import os
import threading
from types import TracebackType
from typing import IO, Any, Dict, Iterable, List, Optional, Sequence, Type, Union

from . import _mpir
from ._errors import SessionClosed, WrongThread
from ._types import Frame, Operation, Rank

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
"""A path: ``str``, ``bytes`` or ``os.PathLike`` (names that are not UTF-8 pass as bytes)."""


def _paths(options: Dict[str, Any]) -> Dict[str, Any]:
    """The options with every path as bytes (``os.fsencode``)."""
    out = dict(options)
    for key in ("types_sidecar", "exe", "agent_program", "agent_token_dir"):
        if out.get(key) is not None:
            out[key] = os.fsencode(out[key])
    if out.get("debug_dirs") is not None:
        out["debug_dirs"] = [os.fsencode(d) for d in out["debug_dirs"]]
    return out


class Session:
    """A session on one MPI job (or on processes named by pid, or on core files).

    Make one with :meth:`attach`, :meth:`launch`, :meth:`pids` or :meth:`cores`, and use it
    as a context manager: leaving the ``with`` block — normally or by an exception — closes it,
    which releases every rank (breakpoints out, threads running) and, for a launch, stops the
    starter (``SIGTERM``) and reaps it unless ``leave_running=True``. A session that Python
    collects without being closed is closed then.

    Options (keywords of every constructor): ``timeout`` (seconds to wait for the job),
    ``ranks`` (a selection such as ``"0-3,7"``), ``debug_dirs`` (directories of separate
    debug information), ``types_sidecar`` (an object file describing the MPI's types, for an
    MPI without debug information that no layout set shipped with mpir fits),
    ``shipped_layouts`` (``False``: do not try the Open MPI layout sets shipped with mpir),
    ``hold_from_acquisition`` (keep the ranks stopped from the acquisition to the
    first read), ``allow_other_users`` (read other users' processes, as root),
    ``this_node_aliases`` (more names of this node), ``exe`` (cores: the executable),
    ``held_wait`` (seconds to wait for another tracer — another ``mpir``, a debugger — to let
    go of the starter or a rank before it is reported as held by it; default 15).

    A job with ranks on other nodes is read there too, as ``mpir`` reads it: an ``mpir agent``
    on each such node, started by the job's own engine (srun, a second hydra job, Open MPI's
    tool daemons) or by ``agent_launch`` (a command with ``{host}`` and ``{agent}``, e.g.
    ``"ssh {host} {agent}"``). ``agent_program`` names the ``mpir`` program there (default:
    the first ``mpir`` on the ``PATH``); ``agent_fanout``, ``agent_listen`` (an IP address
    of this node, with or without a port), ``agent_token_dir`` and ``agent_timeout``
    (seconds) are ``mpir``'s ``--agent-*`` options; ``other_nodes=False`` reads this node
    only. Without a way to reach them (no engine, no ``mpir``), those ranks stay unread and
    say so, unless ``agent_program`` or ``agent_launch`` was given: then it is an error.

    A session belongs to the thread that made it: using it from another thread raises
    :class:`WrongThread`. Every method of a closed session raises :class:`SessionClosed`.
    """

    __slots__ = ("_inner", "_thread", "_stdout", "_stderr")

    def __init__(self, inner: _mpir._Session) -> None:
        """Wraps a session of the extension module; use the class methods instead."""
        self._inner: Optional[_mpir._Session] = inner
        self._thread = threading.get_ident()
        self._stdout: Optional[IO[bytes]] = None
        self._stderr: Optional[IO[bytes]] = None

    # --- sources ---------------------------------------------------------------------------

    @classmethod
    def attach(cls, pid: int, **options: Any) -> Session:
        """Reads the job of the running starter ``pid`` (``mpiexec``, ``orterun``, or an MPI2DD
        process) without touching any rank."""
        return cls(_mpir._Session.attach(pid, _paths(options)))

    @classmethod
    def launch(
        cls,
        argv: Sequence[PathArg],
        *,
        stdin: str = "devnull",
        stdout: str = "inherit",
        stderr: str = "inherit",
        leave_running: bool = False,
        **options: Any,
    ) -> Session:
        """Runs ``argv`` (a starter such as ``mpirun``, or a wrapper that execs one) under
        control and acquires the job it spawns; the ranks then run.

        ``stdin`` is ``"devnull"`` or ``"inherit"``; ``stdout`` and ``stderr`` are
        ``"inherit"``, ``"devnull"`` or ``"pipe"`` (then read :attr:`stdout` /
        :attr:`stderr`). ``leave_running=True`` leaves the job running when the session is
        closed (its ranks released all the same).
        """
        words = [os.fsencode(w) for w in argv]
        opts = _paths(options)
        opts["leave_running"] = leave_running
        inner = _mpir._Session.launch(words, opts, stdin, stdout, stderr)
        session = cls(inner)
        out = inner.take_stdout()
        if out is not None:
            session._stdout = os.fdopen(out, "rb")
        err = inner.take_stderr()
        if err is not None:
            session._stderr = os.fdopen(err, "rb")
        return session

    @classmethod
    def pids(cls, pids: Iterable[int], **options: Any) -> Session:
        """The processes ``pids`` (no starter, no table: their ranks are learnt from their own
        ``MPI_COMM_WORLD`` when read)."""
        return cls(_mpir._Session.pids(list(pids), _paths(options)))

    @classmethod
    def cores(cls, paths: Iterable[PathArg], **options: Any) -> Session:
        """Core files: a starter's core gives the job; ranks' cores are read as the ranks."""
        return cls(_mpir._Session.cores([os.fsencode(p) for p in paths], _paths(options)))

    # --- state -----------------------------------------------------------------------------

    def _live(self) -> _mpir._Session:
        """The extension's session, after the checks every method makes."""
        if threading.get_ident() != self._thread:
            raise WrongThread(
                "this mpir.Session was made on another thread: a session (and the tracer "
                "that holds its ranks) belongs to the thread that made it; make one session "
                "per thread"
            )
        if self._inner is None or self._inner.closed:
            raise SessionClosed("the session is closed: its ranks were released")
        return self._inner

    @property
    def closed(self) -> bool:
        """Whether the session is closed."""
        return self._inner is None or self._inner.closed

    @property
    def starter_pid(self) -> Optional[int]:
        """The starter's pid, for a session from a starter."""
        pid: Optional[int] = self._live().starter_pid
        return pid

    @property
    def source(self) -> str:
        """``"starter"``, ``"pids"`` or ``"cores"``."""
        source: str = self._live().source
        return source

    @property
    def stdout(self) -> Optional[IO[bytes]]:
        """A launch with ``stdout="pipe"``: the starter's standard output."""
        return self._stdout

    @property
    def stderr(self) -> Optional[IO[bytes]]:
        """A launch with ``stderr="pipe"``: the starter's standard error."""
        return self._stderr

    # --- reads -----------------------------------------------------------------------------

    @property
    def ranks(self) -> List[Rank]:
        """The job's ranks, in rank order (empty for pids and cores, which have no table)."""
        return [Rank._from_row(row) for row in self._live().ranks()]

    def job(self) -> Optional[Dict[str, Any]]:
        """The job document (``mpir.job/1``, docs/cli-json.md); ``None`` for pids or cores."""
        text = self._live().job()
        if text is None:
            return None
        doc: Dict[str, Any] = json.loads(text)
        return doc

    def queues(self) -> Dict[str, Any]:
        """Every selected rank's message queues (``mpir.queues/1``), each rank stopped only
        while it is read. :meth:`Operation.from_queues` gives typed operations."""
        doc: Dict[str, Any] = json.loads(self._live().queues())
        return doc

    def operations(self) -> List[Operation]:
        """:meth:`queues`, as typed operations."""
        return Operation.from_queues(self.queues())

    def stacks(self, samples: int = 1, interval: float = 0.15) -> Dict[str, Any]:
        """Every rank's stacks merged into one call-prefix tree (``mpir.stacks/2``), the last of
        ``samples`` taken ``interval`` seconds apart. :meth:`Frame.from_stacks` gives typed
        nodes."""
        doc: Dict[str, Any] = json.loads(self._live().stacks(samples, interval))
        return doc

    def frames(self, samples: int = 1, interval: float = 0.15) -> List[Frame]:
        """:meth:`stacks`, as typed tree nodes."""
        return Frame.from_stacks(self.stacks(samples, interval))

    def deadlock(self, samples: int = 3, interval: float = 0.15) -> Dict[str, Any]:
        """The wait-for analysis over ``samples`` reads of the queues ``interval`` seconds
        apart (``mpir.deadlock/4``): cycles found in every sample are deadlocks."""
        doc: Dict[str, Any] = json.loads(self._live().deadlock(samples, interval))
        return doc

    # --- release ---------------------------------------------------------------------------

    def close(self) -> None:
        """Releases every rank; for a launch, stops and reaps the starter (unless
        ``leave_running``). Closing twice does nothing."""
        inner = self._inner
        if inner is None:
            return
        if threading.get_ident() != self._thread:
            raise WrongThread(
                "this mpir.Session was made on another thread: close it on that thread"
            )
        self._inner = None
        inner.close()
        for stream in (self._stdout, self._stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Session:
        """The session itself."""
        self._live()
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        """Closes the session, whatever ended the block (the exception, if any, goes on)."""
        self.close()

    def __del__(self) -> None:
        """Closes a session Python collects without it being closed (on its own thread; on
        another, the extension's session is let go when that thread's last reference goes)."""
        try:
            if threading.get_ident() == self._thread:
                self.close()
        except Exception:  # noqa: BLE001 - nothing may escape a finalizer
            pass

    def __repr__(self) -> str:
        """``<mpir.Session starter pid 4242>``, ``<mpir.Session pids>``, ``<mpir.Session closed>``."""
        if self.closed:
            return "<mpir.Session closed>"
        try:
            if self.source == "starter":
                return f"<mpir.Session starter pid {self.starter_pid}>"
            return f"<mpir.Session {self.source}>"
        except Exception:  # noqa: BLE001 - a repr never raises
            return "<mpir.Session>"
