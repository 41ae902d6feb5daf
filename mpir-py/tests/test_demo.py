"""The demo job through the bindings: real child processes, their queues, stacks and
deadlock as the documented JSON documents, and every rank released however the session ends."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import (
    DEMO_RANKS,
    assert_released,
    gone,
    kill_job,
    launch_demo,
    skip_or_fail,
    status,
    thread_statuses,
    validate,
)

import mpir


def test_ranks_are_the_demo_jobs_real_processes(demo: mpir.Session) -> None:
    ranks = demo.ranks
    assert [r.rank for r in ranks] == list(range(DEMO_RANKS))
    starter = demo.starter_pid
    assert starter is not None and starter > 0
    for r in ranks:
        assert isinstance(r, mpir.Rank)
        fields = status(r.pid)
        assert fields is not None, f"rank {r.rank}: pid {r.pid} is no process"
        # A child of the starter, running the demo rank program the table names.
        assert int(fields["PPid"]) == starter
        assert os.readlink(f"/proc/{r.pid}/exe") == r.executable
        assert os.path.basename(r.executable or "") == "mpir-demo-rank"
        assert r.local is True
        assert r.control == "attached"
        assert "rank=" in repr(r) and str(r.pid) in repr(r)
    assert len({r.pid for r in ranks}) == DEMO_RANKS


def test_job_document(demo: mpir.Session) -> None:
    job = demo.job()
    assert job is not None
    assert job["schema"] == "mpir.job/1"
    assert job["starter"]["pid"] == demo.starter_pid
    assert [r["pid"] for r in job["ranks"]] == [r.pid for r in demo.ranks]
    validate(job, "job.v1.json")


def test_deadlock_cycle_0_1_2_and_rank_3_blocked(demo: mpir.Session) -> None:
    report = demo.deadlock(samples=2, interval=0.1)
    assert report["schema"] == "mpir.deadlock/4"
    assert report["verdict"] == "deadlock"
    cycles = [sorted(link["rank"] for link in cycle["chain"]) for cycle in report["cycles"]]
    assert cycles == [[0, 1, 2]]
    assert [b["rank"] for b in report["blocked"]] == [3]
    assert report["coverage"]["complete"] is True
    validate(report, "deadlock.v4.json")


def test_queues_document_and_operations(demo: mpir.Session) -> None:
    queues = demo.queues()
    assert queues["schema"] == "mpir.queues/1"
    validate(queues, "queues.v1.json")
    assert [r["rank"] for r in queues["ranks"]] == list(range(DEMO_RANKS))
    assert all(r["error"] is None for r in queues["ranks"])
    ops = mpir.Operation.from_queues(queues)
    # The ring: rank r waits in a receive from rank r+1 (mod 3) on "demo-ring".
    ring = {
        (op.rank, op.peer_global)
        for op in ops
        if op.kind == "receive" and op.communicator == "demo-ring" and op.status == "pending"
    }
    assert {(0, 1), (1, 2), (2, 0)} <= ring
    pids = {r.rank: r.pid for r in demo.ranks}
    assert all(op.pid == pids[op.rank] for op in ops if op.rank is not None)


def test_stacks_document_and_frames(demo: mpir.Session) -> None:
    stacks = demo.stacks(samples=2, interval=0.05)
    assert stacks["schema"] == "mpir.stacks/2"
    assert stacks["source"] == "starter"
    validate(stacks, "stacks.v2.json")
    frames = demo.frames()
    assert frames[0].kind == "root" and frames[0].parent is None
    assert frames[0].ranks == f"0-{DEMO_RANKS - 1}"
    assert any(f.function == "main" for f in frames)
    assert all(f.parent is None or f.parent < f.index for f in frames)


def test_an_exception_in_the_with_block_releases_every_rank() -> None:
    # The ranks are held from the acquisition on: the exception must let them go.
    session = launch_demo(stdout="devnull", hold_from_acquisition=True, leave_running=True)
    pids = [r.pid for r in session.ranks]
    starter = session.starter_pid
    assert starter is not None
    stopped = [p for p in pids if any(t["State"][0] in "Tt" for t in thread_statuses(p))]
    assert stopped, "the ranks should be held from the acquisition"
    with pytest.raises(RuntimeError, match="the tool failed"):
        with session:
            session.queues()
            raise RuntimeError("the tool failed")
    assert session.closed
    try:
        for pid in pids + [starter]:
            assert_released(pid)
    finally:
        kill_job(starter)


def test_an_exception_before_any_read_releases_held_ranks() -> None:
    session = launch_demo(stdout="devnull", hold_from_acquisition=True, leave_running=True)
    pids = [r.pid for r in session.ranks]
    starter = session.starter_pid
    assert starter is not None
    with pytest.raises(KeyError):
        with session:
            raise KeyError("before any read")
    try:
        for pid in pids + [starter]:
            assert_released(pid)
    finally:
        kill_job(starter)


def test_garbage_collection_releases_every_rank() -> None:
    session = launch_demo(stdout="devnull", hold_from_acquisition=True, leave_running=True)
    pids = [r.pid for r in session.ranks]
    starter = session.starter_pid
    assert starter is not None
    del session
    gc.collect()
    try:
        for pid in pids + [starter]:
            assert_released(pid)
    finally:
        kill_job(starter)


# PyO3 reports the session it could not drop on the wrong thread as an unraisable error.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_session_collected_on_another_thread_is_released_by_release_everything() -> None:
    session = launch_demo(stdout="devnull", hold_from_acquisition=True, leave_running=True)
    pids = [r.pid for r in session.ranks]
    starter = session.starter_pid
    assert starter is not None
    holder = [session]
    del session

    def drop_elsewhere() -> None:
        holder.clear()
        gc.collect()

    thread = threading.Thread(target=drop_elsewhere)
    thread.start()
    thread.join()
    try:
        # It could not be dropped there: its ranks are still held...
        assert any(t["State"][0] in "Tt" for p in pids for t in thread_statuses(p))
        # ...until the escape hatch lets every process go.
        mpir.release_everything()
        for pid in pids + [starter]:
            assert_released(pid)
    finally:
        kill_job(starter)


def test_closing_a_launch_stops_the_job(demo: mpir.Session) -> None:
    pids = [r.pid for r in demo.ranks]
    starter = demo.starter_pid
    assert starter is not None
    demo.close()
    for pid in pids + [starter]:
        assert gone(pid), f"pid {pid} still runs after the session closed"


def test_cores_of_the_demo_ranks(tmp_path: Path) -> None:
    if shutil.which("gcore") is None:
        skip_or_fail("gcore is not installed (Debian's gdb)")
    session = launch_demo()
    pids = [r.pid for r in session.ranks]
    # Released between reads: gdb can attach to dump each rank.
    for pid in pids:
        subprocess.run(
            ["gcore", "-o", str(tmp_path / "core"), str(pid)], check=True, capture_output=True
        )
    session.close()
    # Given as bytes, as a user with any file name would.
    cores = [os.fsencode(tmp_path / f"core.{pid}") for pid in pids]
    with mpir.Session.cores(cores) as post_mortem:
        assert post_mortem.source == "cores"
        assert post_mortem.ranks == [] and post_mortem.job() is None  # no starter's core
        report = post_mortem.deadlock(samples=1, interval=0)
        # One snapshot: the cycle is there, not confirmed over time.
        assert report["verdict"] in ("potential_deadlock", "deadlock")
        chains = [sorted(link["rank"] for link in c["chain"]) for c in report["cycles"]]
        assert chains == [[0, 1, 2]]
        stacks = post_mortem.stacks()
        assert stacks["source"] == "cores"
        assert stacks["coverage"] == {"ranks": DEMO_RANKS, "read": DEMO_RANKS, "complete": True}
