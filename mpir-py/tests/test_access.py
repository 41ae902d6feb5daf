"""A rank another tool holds (gdb at its prompt, attached to rank 1 of a real Open MPI ring):
the Python binding reports it with the same typed refusal as the ``mpir`` tool — one
``denial`` object (code ``traced_by``, gdb's pid and name, the text and the remedy) in the
stacks, queues and deadlock documents — and every other rank is read (issue 32).
Skipped with a reason when Open MPI or gdb is absent; fails instead under
``MPIR_REQUIRE_PEERS=1`` (CI)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List

from conftest import ROOT, assert_released, kill_job, skip_or_fail, status, validate

import mpir

RANKS = 3


def unread(kind: str, doc: Dict[str, Any], field: str) -> List[Dict[str, Any]]:
    """Field ``field`` of each rank a document lists as not read, each with its rank."""
    if kind == "stacks":
        items = doc["unreached"]
    elif kind == "queues":
        items = doc["ranks"]
    else:
        items = doc["coverage"]["not_read"]
    return [dict(i[field], rank=i["rank"]) for i in items if i.get(field)]


def denials(kind: str, doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The ``denial`` objects of a document's unread ranks, each with its rank."""
    return unread(kind, doc, "denial")


def reasons(kind: str, doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The ``why`` objects of a document's unread ranks (the one "not read" vocabulary)."""
    return unread(kind, doc, "why")


def test_a_rank_held_by_gdb_is_refused_with_its_holder_in_every_document(tmp_path: Path) -> None:
    for tool in ("orterun", "mpicc.openmpi", "gdb"):
        if shutil.which(tool) is None:
            skip_or_fail(f"{tool} is not installed")
    source = ROOT / "mpir-cli" / "tests" / "fixtures" / "deadlock.c"
    subprocess.run(["mpicc.openmpi", "-g", "-o", str(tmp_path / "deadlock"), str(source)], check=True)
    (tmp_path / "ring").mkdir()
    job = subprocess.Popen(
        ["orterun", "--allow-run-as-root", "--oversubscribe", "-n", str(RANKS)]
        + [str(tmp_path / "deadlock"), "ring", str(tmp_path / "ring")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OMPI_MPIR_DO_NOT_WARN": "1"},
    )
    gdb = None
    try:
        end = time.monotonic() + 60
        files = [tmp_path / "ring" / f"{r}.pid" for r in range(RANKS)]
        while not all(f.is_file() for f in files):
            assert time.monotonic() < end, "the ranks did not write their pid files"
            time.sleep(0.05)
        time.sleep(0.7)
        pids = [int(f.read_text().strip()) for f in files]
        gdb = subprocess.Popen(
            ["gdb", "-q", "-nx", "-p", str(pids[1])],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while True:
            fields = status(pids[1])
            assert fields is not None
            if fields["TracerPid"] != "0":
                break
            assert time.monotonic() < end + 30, "gdb did not attach"
            time.sleep(0.05)
        assert fields is not None and int(fields["TracerPid"]) == gdb.pid
        expected = {"code": "traced_by", "pid": gdb.pid, "name": "gdb", "rank": 1}
        seen = []
        with mpir.Session.attach(job.pid, timeout=30, held_wait=1.0) as session:
            docs = {
                "stacks": session.stacks(),
                "queues": session.queues(),
                "deadlock": session.deadlock(samples=2, interval=0.1),
            }
        schemas = {"stacks": "stacks.v2.json", "queues": "queues.v1.json", "deadlock": "deadlock.v4.json"}
        for kind, doc in docs.items():
            validate(doc, schemas[kind])
            found = denials(kind, doc)
            assert found, (kind, doc)
            for d in found:
                assert {k: d[k] for k in expected} == expected, (kind, d)
            seen.append(found[0])
        assert all(s == seen[0] for s in seen), seen
        # The one vocabulary: the same `why` for rank 1 in every document, as mpir gives it.
        whys = [w for kind, doc in docs.items() for w in reasons(kind, doc) if w["rank"] == 1]
        assert whys and all(w == whys[0] for w in whys), whys
        assert whys[0]["code"] == "denied"
        assert whys[0]["text"] == f"refused by the kernel: already traced by pid {gdb.pid} (gdb)"
        assert whys[0]["denial"] == {k: v for k, v in seen[0].items() if k != "rank"}
        assert seen[0]["text"] == f"already traced by pid {gdb.pid} (gdb)"
        assert seen[0]["remedy"].startswith(f"detach gdb (pid {gdb.pid})")
        # Every other rank was read.
        assert sorted(r["rank"] for r in docs["queues"]["ranks"] if r["error"] is None) == [0, 2]
        for p in (pids[0], pids[2], job.pid):
            assert_released(p)
    finally:
        if gdb is not None:
            gdb.kill()
            gdb.wait()
        kill_job(job.pid)
