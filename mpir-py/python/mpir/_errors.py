"""The exceptions of mpir. Each carries the library's message with its causes, on one line."""

from __future__ import annotations


class Error(Exception):
    """Every error of mpir: the library's message, with its causes."""


class AcquireError(Error):
    """Acquiring the job from its starter failed (launch, attach, or a mock starter's table)."""


class ControlError(Error):
    """Starting a tracer, or stopping processes named by pid, failed."""


class CoreError(Error):
    """A core file could not be opened (or several starters' cores were given)."""


class NoSuchFile(Error):
    """A file named by the caller does not exist (a core, an executable, a types sidecar)."""


class NothingToRead(Error):
    """The source has nothing to read (no pid, no core, or the rank selection leaves none)."""


class AnalysisError(Error):
    """The deadlock (wait-for) analysis refused its input."""


class UnsupportedError(Error):
    """The operation is not possible for this session's source."""


class SessionClosed(Error):
    """The session was closed: its ranks were released and it can read nothing more."""


class WrongThread(Error):
    """A session was used from a thread other than the one that made it."""


__all__ = [
    "AcquireError",
    "AnalysisError",
    "ControlError",
    "CoreError",
    "Error",
    "NoSuchFile",
    "NothingToRead",
    "SessionClosed",
    "UnsupportedError",
    "WrongThread",
]
