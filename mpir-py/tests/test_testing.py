"""mpir.testing: fake starters laid out in mock targets, read by the library's own
acquisition — including hostile tables."""

from __future__ import annotations

import dataclasses

import pytest

import mpir
from mpir.testing import MockJob, MockRank, MockStarter


def test_a_uniform_job_in_every_data_model() -> None:
    for model in ("lp64-le", "lp64-be", "ilp32-le", "ilp32-be", "llp64-le"):
        job = dataclasses.replace(MockStarter.uniform(6, hosts=2), model=model).read_job()
        assert isinstance(job, MockJob)
        assert [r.rank for r in job.ranks] == list(range(6)), model
        assert [r.pid for r in job.ranks] == list(range(1000, 1006)), model
        assert [r.host for r in job.ranks] == ["node00", "node01"] * 3, model
        assert {r.executable for r in job.ranks} == {"/bin/app"}
        # node00 is this node (the default), node01 another: never touched.
        assert [r.local for r in job.ranks] == [True, False] * 3
        assert [r.control for r in job.ranks] == ["not_attached", "remote"] * 3
        assert job.problems == []


def test_this_node_decides_locality() -> None:
    job = MockStarter.uniform(4, hosts=2).read_job(this_node=["node01"])
    assert [r.local for r in job.ranks] == [False, True, False, True]


def test_names_that_are_not_utf8_or_unreadable_are_problems_not_crashes() -> None:
    starter = MockStarter(
        ranks=[
            MockRank(b"node\xff\xfe", "/bin/app", 10),
            MockRank("node00", None, 11),
            MockRank("node00", b"", 12),
            MockRank(None, None, 0),
        ]
    )
    job = starter.read_job()
    assert len(job.ranks) == 4
    assert job.ranks[0].host is not None and job.ranks[0].host.startswith("node")
    assert job.ranks[0].local is not True  # an implausible name is not trusted as this node
    assert job.ranks[1].executable is None
    assert job.ranks[3].host is None and job.ranks[3].local is None
    text = "\n".join(job.problems)
    assert "rank 0: host_name" in text and "UTF-8" in text
    assert "rank 1: executable_name" in text
    assert "rank 3: host_name" in text and "rank 3: pid" in text


def test_hostile_counts_raise_acquire_errors_with_the_librarys_message() -> None:
    base = MockStarter.uniform(2)
    with pytest.raises(mpir.AcquireError, match="MPIR_proctable_size"):
        dataclasses.replace(base, proctable_size=-1).read_job()
    with pytest.raises(mpir.AcquireError, match="above the limit"):
        dataclasses.replace(base, proctable_size=2**31 - 1).read_job()
    # A count past the table: the bytes after it are not a table.
    with pytest.raises(mpir.AcquireError):
        dataclasses.replace(base, proctable_size=100_000).read_job()


def test_values_that_do_not_fit_the_model_are_value_errors() -> None:
    with pytest.raises(ValueError, match="C int"):
        MockStarter(ranks=[MockRank("node00", "/bin/app", 2**40)]).read_job()
    with pytest.raises(ValueError, match="C int"):
        dataclasses.replace(MockStarter.uniform(1), proctable_size=2**40).read_job()
    with pytest.raises(ValueError, match="model"):
        dataclasses.replace(MockStarter.uniform(1), model="pdp11").read_job()


def test_an_empty_table_is_no_spawned_job() -> None:
    # MPIR_proctable_size 0: the starter has spawned nothing yet; the reader waits for the
    # spawn event, which a mock never sends: an error saying what was awaited.
    with pytest.raises(mpir.AcquireError, match="spawn"):
        MockStarter(ranks=[]).read_job()


def test_an_unknown_debug_state_is_read_and_noted() -> None:
    job = dataclasses.replace(MockStarter.uniform(2), debug_state=7).read_job()
    # The library reads the table and says what it saw.
    assert [r.pid for r in job.ranks] == [1000, 1001]
    assert any("MPIR_debug_state is 7" in note for note in job.notes), job.notes
