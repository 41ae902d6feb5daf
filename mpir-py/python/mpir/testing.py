"""Fake MPIR starters for tool test suites: lay out a process table (hostile if you like) in a
mock target and read it with the library's own acquisition, as if a tool attached to a real
starter with that table::

    from mpir.testing import MockRank, MockStarter

    starter = MockStarter(ranks=[MockRank("node00", "/bin/app", 100), MockRank(b"\\xff", None, -1)])
    job = starter.read_job(this_node=["node00"])
    job.ranks[0].local  # True
    job.problems        # rank 1's unreadable executable, its pid, its host name
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Union

from . import _mpir
from ._types import Rank

MockString = Union[str, bytes, None]
"""A name in a mock table: text, raw bytes (need not be UTF-8), or ``None`` for a string the
reader cannot read (its memory is protected)."""


def _raw(value: MockString) -> Optional[bytes]:
    """A name's bytes as the table stores them (text as UTF-8; ``None`` stays unreadable)."""
    if value is None or isinstance(value, bytes):
        return value
    return value.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class MockRank:
    """One entry of a mock process table."""

    host: MockString
    """Host name (bytes need not be UTF-8; ``None``: unreadable)."""
    executable: MockString
    """Executable name (bytes need not be UTF-8; ``None``: unreadable)."""
    pid: int
    """The pid as the table gives it (any C ``int``: 0 and negatives are hostile values)."""


@dataclass(frozen=True)
class MockJob:
    """What the library read from a mock starter."""

    ranks: List[Rank]
    """The ranks, typed as :attr:`mpir.Session.ranks` gives them."""
    problems: List[str]
    """Entries that could not be read, or names that are not plausible (kept, not trusted)."""
    notes: List[str]
    """The acquisition's notes."""


@dataclass(frozen=True)
class MockStarter:
    """A fake MPIR starter: ``ranks`` laid out as ``MPIR_proctable`` in a mock target of data
    model ``model`` (``"lp64-le"``, ``"lp64-be"``, ``"ilp32-le"``, ``"ilp32-be"``,
    ``"llp64-le"``), with the MPIR symbols a starter defines.

    ``proctable_size`` overrides ``MPIR_proctable_size`` once the table is laid out (a count
    past the table, negative, or huge); ``debug_state`` is ``MPIR_debug_state`` (1: spawned;
    0 makes the reader wait for a spawn that never comes; other values are unknown states).
    """

    ranks: Sequence[MockRank] = field(default_factory=list)
    """The table's entries, in rank order."""
    model: str = "lp64-le"
    """The data model the table is laid out in."""
    proctable_size: Optional[int] = None
    """``MPIR_proctable_size`` as written over the true count (``None``: the true count)."""
    debug_state: int = 1
    """``MPIR_debug_state``."""
    share_strings: bool = True
    """Store each distinct name once, as the spec recommends (raw-bytes and unreadable names
    are always stored once per entry)."""

    @classmethod
    def uniform(
        cls, n: int, hosts: int = 1, executable: str = "/bin/app", first_pid: int = 1000
    ) -> MockStarter:
        """``n`` ranks on hosts ``node00``, ``node01``… (``hosts`` of them, in turn) running
        ``executable``, pids from ``first_pid``."""
        return cls(
            ranks=[
                MockRank(f"node{i % max(hosts, 1):02}", executable, first_pid + i)
                for i in range(n)
            ]
        )

    def read_job(self, this_node: Sequence[str] = ("node00",)) -> MockJob:
        """Reads the job as a tool attaching to this starter would (no rank touched), with the
        hosts ``this_node`` as this node. Raises :class:`mpir.AcquireError` with the library's
        message when the table cannot be acquired (a bad count, a NULL table…), and
        ``ValueError`` when a value does not fit the data model."""
        rows, problems, notes = _mpir.read_mock_job(
            [(_raw(r.host), _raw(r.executable), r.pid) for r in self.ranks],
            self.model,
            self.proctable_size,
            self.debug_state,
            list(this_node),
            self.share_strings,
        )
        return MockJob([Rank._from_row(row) for row in rows], problems, notes)


__all__ = ["MockJob", "MockRank", "MockStarter", "MockString"]
