"""Typed views of the rank table and of the JSON documents: :class:`Rank`,
:class:`Operation` (a pending message-queue operation, from ``mpir.queues/1``) and
:class:`Frame` (a node of the merged stack tree, from ``mpir.stacks/2``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

RankRow = Tuple[int, int, Optional[str], Optional[str], Optional[bool], str]


@dataclass(frozen=True)
class Rank:
    """One rank of the job, as the starter's process table gives it."""

    rank: int
    """Rank in ``MPI_COMM_WORLD``."""
    pid: int
    """The pid as the table reports it (it means something only on the rank's own node)."""
    host: Optional[str]
    """Host name as reported; ``None`` when it could not be read."""
    executable: Optional[str]
    """Executable name as reported; ``None`` when it could not be read."""
    local: Optional[bool]
    """Whether the host is this node; ``None`` when unknown (no usable host name)."""
    control: str
    """How the rank was handled: ``"attached"``, ``"not_attached"``, ``"remote"``,
    ``"refused: <reason>"`` or ``"failed: <reason>"``."""

    @classmethod
    def _from_row(cls, row: RankRow) -> Rank:
        rank, pid, host, executable, local, control = row
        return cls(rank, pid, host, executable, local, control)


@dataclass(frozen=True)
class Operation:
    """One operation in a rank's message queues (an ``operations[]`` entry of
    ``mpir.queues/1``, with the rank and communicator it belongs to)."""

    rank: Optional[int]
    """The rank whose queue holds it (``None`` for a process without a world rank)."""
    pid: int
    """That rank's pid."""
    communicator: Optional[str]
    """The communicator's name."""
    communicator_id: Optional[int]
    """The communicator's id within the rank."""
    kind: str
    """``"send"``, ``"receive"`` or ``"unexpected"`` (the document's ``class``)."""
    status: Any
    """``"pending"``, ``"matched"``, ``"complete"``, or ``{"unknown": n}``."""
    peer_local: Optional[int]
    """The peer's rank in the communicator (``None``: any source, or unknown)."""
    peer_global: Optional[int]
    """The peer's rank in ``MPI_COMM_WORLD``, when known."""
    tag: Optional[int]
    """The tag (``None`` for ``MPI_ANY_TAG``)."""
    length_bytes: Optional[int]
    """The buffer's length in bytes, when known."""
    buffer: Optional[str]
    """The buffer's address, in hexadecimal."""

    @classmethod
    def from_queues(cls, document: Mapping[str, Any]) -> List[Operation]:
        """Every operation of a ``mpir.queues/1`` document, rank by rank, communicator by
        communicator."""
        out: List[Operation] = []
        for rank in document.get("ranks") or []:
            for comm in rank.get("communicators") or []:
                for op in comm.get("operations") or []:
                    out.append(
                        cls(
                            rank=rank.get("rank"),
                            pid=rank.get("pid", 0),
                            communicator=comm.get("name"),
                            communicator_id=comm.get("id"),
                            kind=op.get("class", ""),
                            status=op.get("status"),
                            peer_local=op.get("peer_local"),
                            peer_global=op.get("peer_global"),
                            tag=op.get("tag"),
                            length_bytes=op.get("length_bytes"),
                            buffer=op.get("buffer"),
                        )
                    )
        return out


@dataclass(frozen=True)
class Frame:
    """One node of the merged call-prefix tree of every rank's stacks (a ``nodes[]`` entry of
    ``mpir.stacks/2``)."""

    index: int
    """The node's index in the document's ``nodes``."""
    parent: Optional[int]
    """The parent node's index (``None`` for the root ``/``)."""
    kind: str
    """``"root"``, ``"function"``, ``"address"``, ``"thread"``, ``"helpers"`` or ``"python"`` (a
    Python function at a line: ``file`` and ``line`` always set)."""
    function: str
    """The function (or ``module+0xoffset``, or the thread kind)."""
    module: str
    """The file it is in."""
    file: Optional[str]
    """The source file, when known."""
    line: Optional[int]
    """The source line, when known."""
    ranks: str
    """The ranks whose stacks pass through it, as compact ranges (``"0-3,7"``)."""
    threads: int
    """How many threads pass through it."""

    @classmethod
    def from_stacks(cls, document: Mapping[str, Any]) -> List[Frame]:
        """Every node of a ``mpir.stacks/2`` document, in pre-order."""
        return [
            cls(
                index=i,
                parent=node.get("parent"),
                kind=node.get("kind", ""),
                function=node.get("function", ""),
                module=node.get("module", ""),
                file=node.get("file"),
                line=node.get("line"),
                ranks=node.get("ranks", ""),
                threads=node.get("threads", 0),
            )
            for i, node in enumerate(document.get("nodes") or [])
        ]
