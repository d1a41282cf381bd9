"""Shared test fixtures: copies of the real recorded reports, and the GPU marker."""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SHARED = Path(os.environ.get("PROFCTL_SHARED_FIXTURES", ROOT.parent / "shared" / "fixtures" / "h100-sm90"))


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


@pytest.fixture
def shared_fixture(tmp_path: Path) -> Callable[[str], Path]:
    """Copy one of ../shared/fixtures/h100-sm90/<name> into tmp_path (gunzipping `.gz` when asked with
    `name` minus `.gz`) and return the copy; the originals are never touched."""

    def get(name: str) -> Path:
        src = SHARED / name
        dst = tmp_path / name
        if src.exists():
            shutil.copyfile(src, dst)
            return dst
        gz = SHARED / (name + ".gz")
        if gz.exists():
            with gzip.open(gz, "rb") as fi, open(dst, "wb") as fo:
                shutil.copyfileobj(fi, fo)
            return dst
        raise FileNotFoundError(f"shared fixture {name} not found under {SHARED} (set PROFCTL_SHARED_FIXTURES)")

    return get


@pytest.fixture
def data_file(tmp_path: Path) -> Callable[[str], Path]:
    """Copy tests/data/<name> (gunzipped when asked without `.gz`) into tmp_path."""

    def get(name: str) -> Path:
        src = DATA / name
        dst = tmp_path / name
        if src.exists():
            shutil.copyfile(src, dst)
            return dst
        with gzip.open(DATA / (name + ".gz"), "rb") as fi, open(dst, "wb") as fo:
            shutil.copyfileobj(fi, fo)
        return dst

    return get
