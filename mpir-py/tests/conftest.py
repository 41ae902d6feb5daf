"""Shared helpers of the mpir test suite: the demo job, /proc facts, skipping rules."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

import mpir

ROOT = Path(__file__).resolve().parents[2]
"""The repository (the schemas are in docs/schema)."""

DEMO_RANKS = 4


def require_peers() -> bool:
    """Whether a missing peer (mpirun, jsonschema…) fails instead of skipping (CI)."""
    return os.environ.get("MPIR_REQUIRE_PEERS") == "1"


def skip_or_fail(reason: str) -> None:
    """Skips with ``reason``, or fails under ``MPIR_REQUIRE_PEERS=1``."""
    if require_peers():
        pytest.fail(f"MPIR_REQUIRE_PEERS=1: {reason}")
    pytest.skip(reason)


def status(pid: int) -> Optional[Dict[str, str]]:
    """``/proc/<pid>/status`` as a dict, ``None`` when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def thread_statuses(pid: int) -> List[Dict[str, str]]:
    """Every thread's status of ``pid`` (empty when it is gone)."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    for tid in tids:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except FileNotFoundError:
            continue
        fields = {}
        for line in text.splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        out.append(fields)
    return out


def assert_released(pid: int) -> None:
    """Every thread of ``pid`` is alive, not traced (TracerPid 0) and not stopped (State not
    T or t)."""
    threads = thread_statuses(pid)
    assert threads, f"pid {pid} is gone"
    for fields in threads:
        assert fields["TracerPid"] == "0", f"pid {pid}: still traced: {fields}"
        assert fields["State"][0] not in "Tt", f"pid {pid}: left stopped: {fields}"


def gone(pid: int, seconds: float = 10.0) -> bool:
    """Whether ``pid`` exits (or is a zombie) within ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        fields = status(pid)
        if fields is None or fields["State"].startswith("Z"):
            return True
        time.sleep(0.05)
    return False


def wait_ready(session: mpir.Session, n: int = DEMO_RANKS, seconds: float = 30.0) -> None:
    """Reads the demo starter's output (``stdout="pipe"``) until ``n`` ranks said ready."""
    assert session.stdout is not None
    end = time.monotonic() + seconds
    ready = 0
    while ready < n:
        assert time.monotonic() < end, "the demo ranks did not get ready"
        line = session.stdout.readline()
        assert line, "the demo job ended before its ranks were ready"
        if line.rstrip().endswith(b" ready"):
            ready += 1


def launch_demo(stdout: str = "pipe", **options: Any) -> mpir.Session:
    """The demo job (4 ranks, a minute at most) under a session; with ``stdout="pipe"`` (and
    the ranks not held) once its ranks said they are ready."""
    session = mpir.Session.launch(
        [mpir.demo_starter(), "-n", str(DEMO_RANKS), "--lifetime", "60"],
        stdout=stdout,
        timeout=30,
        **options,
    )
    if stdout == "pipe" and not options.get("hold_from_acquisition"):
        wait_ready(session)
    return session


@pytest.fixture
def demo() -> Iterator[mpir.Session]:
    """A session on the demo job, closed (job stopped) after the test."""
    session = launch_demo()
    try:
        yield session
    finally:
        session.close()


def validate(document: Dict[str, Any], schema_file: str) -> None:
    """Validates ``document`` against ``docs/schema/<schema_file>`` (jsonschema)."""
    try:
        import jsonschema  # type: ignore[import-untyped]
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012
    except ImportError:
        skip_or_fail("jsonschema is not installed (scripts/ci-python.sh installs it)")
        return
    # The schemas name each other by file name (deadlock.v4.json uses queues.v1.json's $defs).
    schemas = {
        path.name: json.loads(path.read_text()) for path in (ROOT / "docs" / "schema").glob("*.json")
    }
    registry: Registry[Any] = Registry().with_resources(
        (name, Resource.from_contents(schema, default_specification=DRAFT202012))
        for name, schema in schemas.items()
    )
    validator = jsonschema.Draft202012Validator(schemas[schema_file], registry=registry)
    validator.validate(document)


def kill_job(starter: int) -> None:
    """Ends a job left running (``leave_running=True``): SIGTERM to its starter, reaped."""
    try:
        os.kill(starter, 15)
    except ProcessLookupError:
        return
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(starter, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            return
        time.sleep(0.05)
    os.kill(starter, 9)
    os.waitpid(starter, 0)
