"""``LONGEST_FILES`` and ``SUBPROCESS_COVERAGE_FILES`` (tests/conftest.py) name files
that exist: a moved file left behind there is silently started last instead of first,
or its subprocesses silently no longer measured."""

from __future__ import annotations

from pathlib import Path

from conftest import LONGEST_FILES, SUBPROCESS_COVERAGE_FILES

REPO = Path(__file__).resolve().parents[1]


def test_longest_files_exist_once() -> None:
    assert [name for name in LONGEST_FILES if not (REPO / name).is_file()] == []
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)


def test_subprocess_coverage_files_exist_once() -> None:
    files = SUBPROCESS_COVERAGE_FILES
    assert [name for name in files if not (REPO / name).is_file()] == []
    assert len(set(files)) == len(files)
