"""How an executor cuts a sweep into parts, names them, and reads --gpus; the serial executor's one part."""

from __future__ import annotations

from pathlib import Path

import pytest

from profctl.errors import UsageError
from profctl.pipelines.executors import Local, Part, split


def test_split_spreads_one_shapes_backends_over_the_parts() -> None:
    # 2 backends x 4 shapes, backend innermost (the sweep's order), heavier shapes later
    weights = [w for w in (1, 2, 4, 8) for _ in range(2)]
    parts = split(range(8), 2, weights)
    assert sorted(c for p in parts for c in p) == list(range(8))
    assert all(list(p) == sorted(p) for p in parts)
    # each part gets both backends and half the work
    for p in parts:
        assert {c % 2 for c in p} == {0, 1}
        assert sum(weights[c] for c in p) == sum(weights) / 2


def test_split_never_makes_empty_parts() -> None:
    assert split([3, 4], 5) == [(3,), (4,)]
    assert split([0, 1, 2], 1) == [(0, 1, 2)]


def test_part_folders_name_their_gpu() -> None:
    assert Part(3, (1, 2)).dirname({"host": "h", "gpu_index": 5}) == "part-3-gpu5"
    assert Part(0).dirname({"host": "h"}) == "part-0-cpu"


def test_local_runs_one_part_over_every_case_in_the_run_directory(tmp_path: Path) -> None:
    seen = []
    outs = list(Local().map_parts(lambda ctx: (ctx.part, ctx.workdir, ctx.final(ctx.workdir / "x")), range(4),
                                  run_dir=tmp_path, device="cpu", on_event=lambda p, e: seen.append(e)))
    (out,) = outs
    assert out.value == (Part(0, None), tmp_path, tmp_path / "x") and out.error is None and out.dir == tmp_path

    def boom(ctx: object) -> None:
        raise UsageError("no")

    (bad,) = Local().map_parts(boom, range(2), run_dir=tmp_path, device="cpu", on_event=lambda p, e: None)
    assert isinstance(bad.error, UsageError)


def test_requests_run_serially_unless_given_an_executor() -> None:
    from profctl.pipelines.base import Request

    class Marker(Local):
        pass

    assert isinstance(Request(target=None, executor=Marker()).executor, Marker)  # type: ignore[arg-type]
    assert type(Request(target=None).executor) is Local  # type: ignore[arg-type]


def test_gpus_option_parses() -> None:
    pytest.importorskip("distributed")
    from profctl.pipelines.dask_executor import parse_gpus

    assert parse_gpus(None) is None and parse_gpus("all") is None and parse_gpus("0,2,5") == [0, 2, 5]
    for bad in ("0,0", "-1", "a", ","):
        with pytest.raises(UsageError):
            parse_gpus(bad)


def test_case_costs_know_dense_backends_and_masks() -> None:
    import profctl

    w = profctl.workload(backend=["sdpa-flash", "eager"], seqlen=4096, causal=[False, True], device="cuda",
                         heads=32, head_dim=128, dtype="bf16", iters=200)
    (flash, eager, flash_c, eager_c) = w.costs()
    assert eager > 1.5 * flash and eager_c > eager and flash_c < flash


def test_a_workers_children_get_this_processes_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not Dask's worker settings (one OpenMP thread, an aggressive malloc trim); CPU workers split the cores. The
    children get them passed; the worker's own environment is left as it is."""
    pytest.importorskip("distributed")
    import json
    import os
    import sys

    from profctl import run_store
    from profctl.pipelines.dask_executor import DaskExecutor
    from profctl.pipelines.executors import PartContext

    monkeypatch.setenv("MKL_NUM_THREADS", "7")
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    run_dir = run_store.new_run("test", root=tmp_path, env=False)
    keys = ("MKL_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")

    def part(ctx: PartContext) -> dict:
        code = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {keys!r}}}))"
        res = ctx.run([sys.executable, "-c", code], log=ctx.workdir / "env.log", timeout_s=60)
        return json.loads(res.log_text().splitlines()[-1])

    with DaskExecutor(workers=1).session() as ex:
        (out,) = ex.map_parts(part, [0], run_dir=run_dir, device="cpu", on_event=lambda p, e: None)
    assert out.error is None and out.dir == run_dir / "part-0-cpu"
    assert out.value == {"MKL_NUM_THREADS": "7", "MALLOC_TRIM_THRESHOLD_": None,
                         "OMP_NUM_THREADS": str(os.cpu_count()), "OPENBLAS_NUM_THREADS": os.environ.get(
                             "OPENBLAS_NUM_THREADS")}
