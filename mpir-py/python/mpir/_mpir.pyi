"""
The module `mpir._mpir` (the Rust half of the package `mpir`).
"""

from _typeshed import SupportsGetItem
from typing import Final, SupportsFloat, SupportsIndex, final

__all__ = ["__version__", "_Session", "demo_starter", "read_mock_job", "release_everything"]

__version__: Final[str]
"""
The version of the bindings (the mpir-rs workspace's).
"""

@final
class _Session:
    """
    A session on an MPI job (or processes, or core files). Made by the static methods
    `attach`, `launch`, `pids`, `cores`; used through `mpir.Session`.
    """
    @staticmethod
    def attach(pid: SupportsIndex, options: "dict[str, object] | None" = None) -> _Session:
        """
        Reads the job of the running starter `pid` (or an MPI2DD process) without touching
        its ranks.
        """
    def close(self, /) -> None:
        """
        Releases every rank (and, for a launch, stops and reaps the starter unless
        `leave_running`). Closing twice does nothing.
        """
    @property
    def closed(self, /) -> bool:
        """
        Whether the session is closed.
        """
    @staticmethod
    def cores(paths: "list[bytes]", options: "dict[str, object] | None" = None) -> _Session:
        """
        Core files (a starter's core gives the job; ranks' cores are read as the ranks).
        """
    def deadlock(self, /, samples: SupportsIndex, interval: SupportsFloat | SupportsIndex) -> str:
        """
        Samples the queues `samples` times, `interval` seconds apart, and analyses the
        wait-for graph: `mpir.deadlock/4`.
        """
    def job(self, /) -> str | None:
        """
        The job document (`mpir.job/1`) as JSON text; `None` for pids or cores.
        """
    @staticmethod
    def launch(argv: "list[bytes]", options: "dict[str, object] | None" = None, stdin: str = "devnull", stdout: str = "inherit", stderr: str = "inherit") -> _Session:
        """
        Runs `argv` (a starter, or a wrapper that execs one) under control and acquires the
        job it spawns. `stdin` is `"devnull"` or `"inherit"`; `stdout` and `stderr` also
        `"pipe"` (then `take_stdout`/`take_stderr` give the descriptor).
        """
    @staticmethod
    def pids(pids: SupportsGetItem[int, SupportsIndex], options: "dict[str, object] | None" = None) -> _Session:
        """
        Processes named by pid (no starter, no table).
        """
    def queues(self, /) -> str:
        """
        Reads every selected rank's message queues (held while read): `mpir.queues/1`.
        """
    def ranks(self, /) -> list[tuple[int, int, str | None, str | None, bool | None, str]]:
        """
        The job's ranks as tuples (rank, pid, host, executable, local, control); empty for
        sessions of pids or cores, which have no starter's table.
        """
    @property
    def source(self, /) -> str:
        """
        `"starter"`, `"pids"` or `"cores"`.
        """
    def stacks(self, /, samples: SupportsIndex, interval: SupportsFloat | SupportsIndex) -> str:
        """
        Every rank's stacks, merged: `mpir.stacks/2` (the last of `samples`, `interval`
        seconds apart).
        """
    @property
    def starter_pid(self, /) -> int | None:
        """
        The starter's pid, for a session from a starter.
        """
    def take_stderr(self, /) -> int | None:
        """
        Launch with `stderr="pipe"`: the read end's file descriptor, once (the caller owns
        it).
        """
    def take_stdout(self, /) -> int | None:
        """
        Launch with `stdout="pipe"`: the read end's file descriptor, once (the caller owns
        it).
        """

def demo_starter() -> "str":
    """
    The path of the bundled demo job's starter, written out once (privately, verified).
    """

def read_mock_job(ranks: SupportsGetItem[int, tuple[SupportsGetItem[int, SupportsIndex] | None, SupportsGetItem[int, SupportsIndex] | None, SupportsIndex]], model_name: str = "lp64-le", proctable_size: SupportsIndex | None = None, debug_state: SupportsIndex = 1, this_node: SupportsGetItem[int, str] = ..., share_strings: bool = True) -> tuple[list[tuple[int, int, str | None, str | None, bool | None, str]], list[str], list[str]]:
    """
    Lays out a starter with `ranks` (host, executable, pid) in a mock target of `model`, then
    reads its job as `mpir` would attach to it: typed ranks, problems, notes; or raises
    `AcquireError` with the library's message.

    `proctable_size` overrides `MPIR_proctable_size` after the table is laid out (a count past
    the table, negative, or huge); `debug_state` overrides `MPIR_debug_state` (1 = spawned);
    `this_node` names the hosts that are this node (the ranks' `local`).
    """

def release_everything() -> None:
    """
    Lets go of every process this program holds, now, whichever session holds it (from any
    thread): the way out for a session that cannot be closed — one Python collected on
    another thread than its own, which the bindings cannot drop there.
    """
