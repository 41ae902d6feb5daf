"""Bad input and misuse: closed sessions, wrong threads, bad options, paths that are not
UTF-8 — each an exception with the library's message, never a crash."""

from __future__ import annotations

import os
import subprocess
import threading
from typing import Any, Callable, List

import pytest
from conftest import launch_demo

import mpir


def test_the_hierarchy() -> None:
    for cls in (
        mpir.AcquireError,
        mpir.ControlError,
        mpir.CoreError,
        mpir.NoSuchFile,
        mpir.NothingToRead,
        mpir.AnalysisError,
        mpir.UnsupportedError,
        mpir.SessionClosed,
        mpir.WrongThread,
    ):
        assert issubclass(cls, mpir.Error) and issubclass(cls, Exception)
        assert cls.__doc__
    assert mpir.__version__.count(".") == 2


def test_a_closed_session_raises_on_every_method() -> None:
    session = launch_demo()
    session.close()
    session.close()  # twice: nothing
    assert session.closed
    calls: List[Callable[[], Any]] = [
        lambda: session.ranks,
        session.job,
        session.queues,
        session.operations,
        lambda: session.stacks(),
        lambda: session.deadlock(samples=1, interval=0),
        lambda: session.starter_pid,
        lambda: session.source,
    ]
    for call in calls:
        with pytest.raises(mpir.SessionClosed, match="closed"):
            call()
    with pytest.raises(mpir.SessionClosed):
        with session:
            pass
    assert repr(session) == "<mpir.Session closed>"


def test_the_extensions_own_session_raises_when_closed_and_on_other_threads() -> None:
    # Below the Python layer's checks, the extension module keeps its own guarantees.
    session = mpir.Session.pids([os.getpid()])
    inner = session._inner
    assert inner is not None
    caught: List[BaseException] = []

    def other() -> None:
        try:
            inner.ranks()
        except BaseException as e:  # noqa: BLE001 - PyO3 raises a PanicException
            caught.append(e)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert len(caught) == 1 and "unsendable" in str(caught[0]), caught
    inner.close()
    assert inner.closed
    for call in (inner.ranks, inner.queues, inner.job, lambda: inner.deadlock(2, 0.1)):
        with pytest.raises(mpir.SessionClosed):
            call()
    inner.close()
    session.close()


def test_use_from_another_thread_raises_wrong_thread() -> None:
    session = mpir.Session.pids([os.getpid()])
    caught: List[BaseException] = []

    def other() -> None:
        for call in (lambda: session.ranks, session.queues, session.close):
            try:
                call()
            except BaseException as e:  # noqa: BLE001 - the test looks at what came
                caught.append(e)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert len(caught) == 3
    for e in caught:
        assert isinstance(e, mpir.WrongThread), repr(e)
        assert "thread" in str(e)
    # The session is intact on its own thread.
    assert not session.closed
    assert session.source == "pids"
    session.close()


def test_attaching_to_a_process_that_is_no_starter() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(mpir.AcquireError) as caught:
            mpir.Session.attach(sleeper.pid, timeout=5)
        assert str(sleeper.pid) in str(caught.value)
        # Let go: not stopped, not traced.
        with open(f"/proc/{sleeper.pid}/status") as f:
            text = f.read()
        assert "TracerPid:\t0\n" in text
    finally:
        sleeper.kill()
        sleeper.wait()


def test_launching_a_missing_program_says_which() -> None:
    with pytest.raises(mpir.AcquireError, match="no-such-starter"):
        mpir.Session.launch(["/nonexistent/no-such-starter", "-n", "2"], timeout=5)


def test_paths_that_are_not_utf8_work_or_raise_clearly(tmp_path: Any) -> None:
    # A starter in a directory whose name is not UTF-8: launched as the bytes it is.
    odd = os.fsencode(str(tmp_path)) + b"/dir-\xff\xfe"
    os.mkdir(odd)
    starter = odd + b"/starter"
    os.symlink(os.fsencode(mpir.demo_starter()), starter)
    with mpir.Session.launch([starter, "-n", "2", "--lifetime", "60"], timeout=30) as session:
        assert len(session.ranks) == 2
    # A missing core whose name is not UTF-8: an error naming it, not a crash.
    with pytest.raises(mpir.Error) as caught:
        mpir.Session.cores([odd + b"/core.\xff"])
    assert "core." in str(caught.value)
    # str with surrogate escapes (os.fsdecode of such a name) is the same path.
    with pytest.raises(mpir.Error):
        mpir.Session.cores([os.fsdecode(odd + b"/core.\xff")])


def test_bad_options() -> None:
    with pytest.raises(TypeError, match='unknown session option "colour"'):
        mpir.Session.pids([1], colour="blue")
    with pytest.raises(ValueError, match="ranks"):
        mpir.Session.pids([1], ranks="3-1x")
    with pytest.raises(ValueError, match="timeout"):
        mpir.Session.pids([1], timeout=-1)
    with pytest.raises(ValueError, match="timeout"):
        mpir.Session.pids([1], timeout=float("nan"))
    with pytest.raises(mpir.NothingToRead):
        mpir.Session.pids([])
    with pytest.raises(ValueError, match="argv is empty"):
        mpir.Session.launch([])
    with pytest.raises(ValueError, match="stdout"):
        mpir.Session.launch(["/bin/true"], stdout="loud")
    with pytest.raises(OverflowError):
        mpir.Session.pids([-1])


def test_bad_sampling_arguments(demo: mpir.Session) -> None:
    with pytest.raises(ValueError, match="samples"):
        demo.deadlock(samples=0)
    with pytest.raises(ValueError, match="interval"):
        demo.deadlock(samples=2, interval=-0.5)
    with pytest.raises(ValueError, match="interval"):
        demo.stacks(samples=2, interval=float("inf"))
    # The session still works.
    assert demo.deadlock(samples=2, interval=0)["verdict"] == "deadlock"
