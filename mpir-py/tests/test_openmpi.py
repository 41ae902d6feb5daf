"""A real Open MPI job (Debian's openmpi-bin): launched under a session through ``mpirun``, its
ranks' queues read by the native Open MPI walker (stock: no debug information, no types
sidecar; the types come from the layout set shipped with mpir, proven on each rank), the
ring's deadlock found, every rank released.
Skipped with a reason when Open MPI is not installed; fails instead under
``MPIR_REQUIRE_PEERS=1`` (CI)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict

import pytest
from conftest import ROOT, assert_released, gone, kill_job, skip_or_fail, validate

import mpir

RANKS = 2


@pytest.fixture
def ring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared deadlock fixture (mpir-cli/tests/fixtures/deadlock.c) built with Open MPI's
    mpicc; returns its directory (the program is ``deadlock``, the pid files go to ``ring/``)."""
    for tool in ("mpirun", "mpicc.openmpi"):
        if shutil.which(tool) is None:
            skip_or_fail(f"{tool} is not installed (Debian's openmpi-bin, libopenmpi-dev)")
    source = ROOT / "mpir-cli" / "tests" / "fixtures" / "deadlock.c"
    subprocess.run(
        ["mpicc.openmpi", "-g", "-o", str(tmp_path / "deadlock"), str(source)], check=True
    )
    (tmp_path / "ring").mkdir()
    # Open MPI warns on stderr when MPIR is used; the job itself is unchanged.
    monkeypatch.setenv("OMPI_MPIR_DO_NOT_WARN", "1")
    return tmp_path


def argv(dir: Path) -> list[str]:
    return [
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        str(RANKS),
        str(dir / "deadlock"),
        "ring",
        str(dir / "ring"),
    ]


def launch(dir: Path, shipped_layouts: bool = True) -> mpir.Session:
    """The ring launched under a session, its output discarded, left running at the end; with
    ``shipped_layouts=False``, an Open MPI whose layouts mpir does not ship."""
    options: Dict[str, Any] = {} if shipped_layouts else {"shipped_layouts": False}
    return mpir.Session.launch(
        argv(dir),
        stdout="devnull",
        stderr="devnull",
        timeout=60,
        leave_running=True,
        **options,
    )


def wait_in_ring(dir: Path) -> None:
    """Until every rank wrote its pid file (just before its blocking receive), and a moment."""
    end = time.monotonic() + 60
    while not all((dir / "ring" / f"{r}.pid").is_file() for r in range(RANKS)):
        assert time.monotonic() < end, "the ranks did not write their pid files"
        time.sleep(0.05)
    time.sleep(0.7)


def test_an_open_mpi_ring_deadlocks_and_is_released(ring: Path) -> None:
    session = launch(ring)
    starter = session.starter_pid
    assert starter is not None
    try:
        with session:
            ranks = session.ranks
            assert [r.rank for r in ranks] == list(range(RANKS))
            wait_in_ring(ring)
            for r in ranks:
                written = (ring / "ring" / f"{r.rank}.pid").read_text().strip()
                assert int(written) == r.pid, "the table's pid is the rank's own"
            job = session.job()
            assert job is not None and job["starter"]["launcher"]
            validate(job, "job.v1.json")
            queues = session.queues()
            validate(queues, "queues.v1.json")
            assert queues["engine"].startswith("native Open MPI"), queues["engine"]
            for r in queues["ranks"]:
                assert "types: shipped layouts of openmpi 4.1.4 debian lp64, proven on this rank" in r[
                    "notes"
                ], r
            # Each rank waits in a receive from the next (tag 10).
            ops = mpir.Operation.from_queues(queues)
            waits = {(op.rank, op.peer_global) for op in ops if op.kind == "receive" and op.tag == 10}
            assert waits == {(0, 1), (1, 0)}, ops
            report = session.deadlock(samples=2, interval=0.2)
            validate(report, "deadlock.v4.json")
            assert report["verdict"] == "deadlock"
            chains = [sorted(link["rank"] for link in c["chain"]) for c in report["cycles"]]
            assert chains == [[0, 1]]
            # Then the tool fails inside the block: every rank is let go all the same.
            raise LookupError("the tool failed")
    except LookupError:
        pass
    try:
        for r in ranks:
            assert_released(r.pid)
        assert_released(starter)
    finally:
        kill_job(starter)
    for r in ranks:
        assert gone(r.pid), f"rank {r.rank} outlived its starter"


def test_without_types_the_ring_is_judged_by_its_stacks(ring: Path) -> None:
    """An Open MPI whose types are nowhere (no debug information, no types sidecar, the shipped
    layouts not tried): no queue can be read, yet the ring is a hang —
    every rank blocked in MPI_Recv and unmoved (``blocked_in_mpi``), each rank covered by its
    stacks with the reason its queues were not read (issue 29)."""
    session = launch(ring, shipped_layouts=False)
    starter = session.starter_pid
    assert starter is not None
    try:
        with session:
            ranks = session.ranks
            wait_in_ring(ring)
            report = session.deadlock(samples=3, interval=0.15)
            validate(report, "deadlock.v4.json")
            assert report["verdict"] == "blocked_in_mpi", report
            assert [s["source"] for s in report["sources"]] == ["stacks"], report
            assert report["coverage"]["read"] == RANKS
            assert len(report["coverage"]["stacks_only"]) == RANKS
            waits = report["stack_waits"]
            assert waits["hang"] is True
            assert [(b["call"], b["ranks"]) for b in waits["blocked"]] == [
                ("MPI_Recv", f"0-{RANKS - 1}")
            ], waits
            assert waits["blocked"][0]["call_site"]["function"] == "main"
        for r in ranks:
            assert_released(r.pid)
        assert_released(starter)
    finally:
        kill_job(starter)
