"""Shared test fixtures: copies of the real recorded reports in tests/data, and the GPU marker.

Everything the tests read is in the repository (tests/data/README.md says how each file was made), so a fresh
clone passes the test suite with nothing beside it.
"""

from __future__ import annotations

import gzip
import lzma
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# a CPU bench run times each point in three processes by default (profctl.analysis.compare.stats.PROCESSES); the
# suite's hundreds of bench runs take one each, for time, and tests/cli/test_processes.py times the default itself
os.environ.setdefault("PROFCTL_BENCH_PROCESSES", "1")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
#: real reports from an H100, recorded independently of profctl (tests/data/h100-sm90/README.md)
H100 = DATA / "h100-sm90"


def _has_cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def copy_data(folder: Path, name: str, dst_dir: Path) -> Path:
    """Copy `folder/name` into `dst_dir`; when only `name.gz` or `name.xz` exists, decompress it there."""
    src = folder / name
    dst = dst_dir / name
    if src.exists():
        shutil.copyfile(src, dst)
        return dst
    for suffix, opener in ((".gz", gzip.open), (".xz", lzma.open)):
        packed = folder / (name + suffix)
        if packed.exists():
            with opener(packed, "rb") as fi, open(dst, "wb") as fo:
                shutil.copyfileobj(fi, fo)
            return dst
    raise FileNotFoundError(f"test data {name} not found under {folder}")


@pytest.fixture
def shared_fixture(tmp_path: Path) -> Callable[[str], Path]:
    """A temporary copy of one of the recorded H100 reports (decompressed when asked without `.gz`/`.xz`);
    the originals are never touched."""
    return lambda name: copy_data(H100, name, tmp_path)


@pytest.fixture
def data_file(tmp_path: Path) -> Callable[[str], Path]:
    """A temporary copy of tests/data/<name> (decompressed when asked without `.gz`/`.xz`)."""
    return lambda name: copy_data(DATA, name, tmp_path)


def sigint_as_in_a_terminal() -> None:
    """preexec_fn for a child that a test interrupts with SIGINT: a shell running a job in the background (`cmd &`
    without job control, as in some CI runners) starts it with SIGINT ignored, and Python keeps an ignored SIGINT
    ignored; a terminal's Ctrl-C reaches a foreground program with the default action."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def reraise_interrupt(result: Any) -> Any:
    """A CliRunner result, unless the command was interrupted (exit 130): then KeyboardInterrupt, so the test
    session stops as for Ctrl-C. In-process, a SIGINT sent to the test session (`timeout -s INT` around pytest in
    benchmarks/gpu.sh) lands inside the profctl command, whose guard answers it with exit 130 and "interrupted;
    what had finished is kept in ..." -- one test failed with that line while pytest went on to the rest (issue 39
    item 11: test_ncu_nothing_matched_names_what_the_program_launched, 24 s into it, after 330 s of GPU tests)."""
    if getattr(result, "exit_code", None) == 130:
        line = next((ln for ln in (result.stderr or "").splitlines() if "interrupted" in ln), "exit 130")
        raise KeyboardInterrupt(f"the test session was interrupted while a profctl command ran ({line})")
    return result


@pytest.fixture(autouse=True)
def _run_store_of_its_own(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's commands keep their runs (and explain's predictions and tally) in a store of their own, not in
    the checkout's ./reports: a test never sees another's runs. Tests that pass --reports use theirs."""
    monkeypatch.setenv("PROFCTL_REPORTS", str(tmp_path_factory.mktemp("reports")))
