"""A deployment's ``auto`` budget (the whole process: the lower of the cgroup
limit and the available memory plus what the process holds) and a stage's
split of it into fixed overhead, margin and data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gnncore.usage as usage_module
from gnncore.memory import UNLIMITED, cgroup_limit, mem_available
from gnncore.partition import partition_graph
from gnncore.synth import SynthSpec, generate_graph
from gnncore.usage import (
    STAGE_MARGIN,
    MemoryBudgetError,
    StageBudget,
    current_rss_bytes,
    held_bytes,
    process_budget,
    resolve_process_budget,
)


def _cgroup(tmp_path: Path, limit: int | None, line: str = "4:memory:/job") -> tuple[Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    own = tmp_path / "cgroup"
    own.write_text(f"2:cpu,cpuacct:/job\n{line}\n")
    group = tmp_path / "root" / "job"
    group.mkdir(parents=True)
    if limit is not None:
        (group / "memory.limit_in_bytes").write_text(f"{limit}\n")
    return own, tmp_path / "root"


def test_the_cgroup_limit_is_read_and_unlimited_is_none(tmp_path: Path) -> None:
    assert cgroup_limit(*_cgroup(tmp_path / "a", 2 << 30)) == 2 << 30
    assert cgroup_limit(*_cgroup(tmp_path / "b", UNLIMITED)) is None
    assert cgroup_limit(*_cgroup(tmp_path / "c", None)) is None
    assert cgroup_limit(*_cgroup(tmp_path / "d", 1 << 30, "3:pids:/job")) is None
    assert cgroup_limit(tmp_path / "absent", tmp_path) is None
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 4000 kB\nMemAvailable: 3000 kB\n")
    assert mem_available(meminfo) == 3000 * 1024
    assert mem_available(tmp_path / "absent") is None


def test_auto_is_the_lower_of_the_limit_and_what_is_available_plus_held(monkeypatch) -> None:
    held = current_rss_bytes()
    # This machine: at least what the process holds, at most what it could reach.
    assert held <= process_budget() <= (mem_available() or 0) + held + (64 << 20)
    monkeypatch.setattr(usage_module, "current_rss_bytes", lambda: 1 << 30)
    monkeypatch.setattr(usage_module, "mem_available", lambda: 8 << 30)
    monkeypatch.setattr(usage_module, "cgroup_limit", lambda: None)
    assert process_budget() == 9 << 30  # the process's own memory counts
    monkeypatch.setattr(usage_module, "cgroup_limit", lambda: 4 << 30)
    assert process_budget() == resolve_process_budget("auto") == 4 << 30
    monkeypatch.setattr(usage_module, "mem_available", lambda: None)
    assert process_budget() == 4 << 30
    monkeypatch.setattr(usage_module, "cgroup_limit", lambda: None)
    assert process_budget() == usage_module.FALLBACK_BUDGET
    assert resolve_process_budget("none") is None and resolve_process_budget("1GiB") == 1 << 30


def test_a_stage_gives_its_data_what_the_overhead_and_margin_leave() -> None:
    held = np.ones(16 << 20, dtype=np.uint8)  # 16 MiB the stage did not allocate
    # A budget with 1 GiB above what the process holds (an xdist worker may hold 1 GiB).
    total = current_rss_bytes() + (1 << 30)
    share = StageBudget.start(total)
    assert share.overhead == pytest.approx(current_rss_bytes(), abs=8 << 20)
    assert share.overhead >= held.nbytes
    assert share.data_bytes == total - share.overhead - STAGE_MARGIN
    assert share.require(1 << 20, "a test stage") == share.data_bytes
    assert StageBudget.start(None).require(1 << 40, "a test stage") is None
    assert share.to_dict()["data_budget_bytes"] == share.data_bytes


def test_what_a_process_holds_leaves_out_the_pages_of_mapped_data_files(tmp_path: Path) -> None:
    # 128 MiB of a data file read through a map: VmRSS counts its pages, the
    # process does not hold them (a cgroup reclaims them as page cache). The
    # bounds leave room for what the worker's other threads allocate meanwhile
    # (a new thread's stack and malloc arena touch 8 MiB and more).
    path = tmp_path / "data.npy"
    np.save(path, np.arange(16 << 20, dtype=np.int64))
    before_rss, before_held = current_rss_bytes(), held_bytes()
    mapped = np.load(path, mmap_mode="r")
    assert int(mapped.sum()) > 0  # every page touched
    assert current_rss_bytes() - before_rss > 120 << 20
    assert held_bytes() - before_held < 32 << 20
    # 128 MiB of anonymous memory (an array filled in) is held.
    array = np.ones(16 << 20, dtype=np.int64)
    assert held_bytes() - before_held > 120 << 20
    assert StageBudget.start(4 << 30, held=True).overhead < StageBudget.start(4 << 30).overhead
    del mapped, array


def test_too_small_a_budget_is_refused_naming_it_and_the_minimum() -> None:
    share = StageBudget(total=1 << 30, overhead=900 << 20, margin=64 << 20)
    assert share.data_bytes == 60 << 20
    with pytest.raises(MemoryBudgetError) as refused:
        share.require(128 << 20, "the test stage")
    message = str(refused.value)
    assert message.startswith("memory budget of 1.0 GiB is below the 1.1 GiB the test stage")
    assert "900.0 MiB this process holds already" in message
    assert "128.0 MiB at least for its data" in message
    assert StageBudget(total=100 << 20, overhead=200 << 20).data_bytes == 0


def test_the_store_writer_resolves_auto_to_the_whole_process(tmp_path: Path) -> None:
    from gnncore.outofcore.store import build_partitioned_store

    spec = SynthSpec(num_nodes=800, avg_degree=6, num_classes=4, num_features=8, seed=1)
    generate_graph(tmp_path / "g", spec, memory_budget=None)
    partition_graph(tmp_path / "g", tmp_path / "p", method="random", parts=2, balance=False)
    report = build_partitioned_store(tmp_path / "g", tmp_path / "p", tmp_path / "s")
    figures = report.to_dict()
    # auto bounds the process: it covers what the process holds (the fixed overhead).
    assert figures["memory_budget_bytes"] > figures["fixed_bytes"] > current_rss_bytes() // 2
    assert figures["memory_budget_bytes"] >= process_budget() - (256 << 20)
