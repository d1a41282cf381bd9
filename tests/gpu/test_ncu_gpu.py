"""`profctl ncu` on a real GPU with the real ncu (run on the GPU machine: pytest -m gpu tests/gpu).

Clocks are never touched: every run passes --clock-control none.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl import recipes
from profctl.cli import app
from profctl.tools import ncu as adapter

pytestmark = pytest.mark.gpu

SMALL = ["--seqlen", "1024", "--heads", "8", "--clock-control", "none", "--warmup", "2"]


def _ncu_or_skip() -> Path:
    try:
        return adapter.find()
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"ncu not available: {e}")


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()


def _run(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    r = _runner().invoke(app, ["ncu", *args, "--reports", str(tmp_path / "reports")])
    return r.exit_code, r.stdout, r.stderr


def test_every_recipe_metric_exists_on_this_gpu() -> None:
    import torch

    exe = _ncu_or_skip()
    cc = torch.cuda.get_device_capability(0)
    out = subprocess.run([str(exe), "--query-metrics"], capture_output=True, text=True, timeout=300).stdout
    known = {ln.split()[0] for ln in out.splitlines() if ln.strip() and "__" in ln.split()[0]}
    # launch attributes and occupancy figures are computed by ncu, not counters: --query-metrics omits them
    derived = ("launch__", "sm__maximum_warps_")
    missing = [f"{r.name}: {m} ({r.where(m)})" for r in recipes.load_all() for m in r.metric_names(cc)
               if m.split(".")[0] not in known and not m.startswith(derived)]
    assert not missing, missing


def test_one_measured_launch_per_backend_kernel(tmp_path: Path) -> None:
    _ncu_or_skip()
    rc, out, err = _run(["--recipe", "tensor-core", "--backend", "sdpa-flash,eager", *SMALL, "--format", "json"],
                        tmp_path)
    assert rc == 0, err
    doc = json.loads(out)
    launches = doc["summary"]["meta"]["launches"]
    assert launches
    # every launch inside profctl's measured range of a requested backend's forward pass
    for ln in launches:
        assert re.match(r"^profctl@(sdpa-flash|eager)\[[^/]*\]/measure/(sdpa-flash|eager)\.fwd$", ln["nvtx_range"]), ln
    flash = [ln["kernel"] for ln in launches if "sdpa-flash" in ln["nvtx_range"]]
    # FlashAttention-2 in SDPA: flash_fwd_kernel, or split-KV plus its combine kernel at small grids
    assert flash in (["flash_fwd_kernel"], ["flash_fwd_splitkv_kernel", "flash_fwd_splitkv_combine_kernel"]), flash
    eager = [ln for ln in launches if ln["nvtx_range"].startswith("profctl@eager")]
    assert len(eager) >= 3  # matmul, softmax, matmul at least
    # one iteration: no kernel of the measured iteration profiled twice under the same name and grid
    keys = [(ln["name"], tuple(ln["grid"]), tuple(ln["block"])) for ln in launches]
    assert len(keys) == len(set(keys))
    assert all(k["count"] == 1 for k in doc["summary"]["kernels"])
    flash_diag = next(d for d in doc["diagnosis"] if d["backend"] == "sdpa-flash")
    assert flash_diag["tensor_pct"] is not None and flash_diag["tensor_pct"] > 5
    assert flash_diag["bound"] in ("compute-bound", "memory-bound", "latency-bound")


def test_backward_kernels_are_found_on_the_autograd_thread(tmp_path: Path) -> None:
    _ncu_or_skip()
    rc, out, err = _run(["--recipe", "occupancy", "--backend", "sdpa-flash", "--pass", "fwd+bwd", *SMALL,
                         "--format", "json"], tmp_path)
    assert rc == 0, err
    ranges = {ln["nvtx_range"].rsplit("/", 1)[-1] for ln in json.loads(out)["summary"]["meta"]["launches"]}
    assert ranges == {"sdpa-flash.fwd", "sdpa-flash.bwd"}


def test_unknown_metric_is_one_line_error_with_recipe_line(tmp_path: Path) -> None:
    _ncu_or_skip()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsummary: a metric ncu does not know\nmetrics:\n"
                   "  - name: gpu__time_duration.sum\n    label: d\n    means: m\n    read: r\n"
                   "  - name: sm__no_such_counter_anywhere.sum\n    label: x\n    means: m\n    read: r\n")
    rc, _, err = _run(["--recipe", str(bad), "--backend", "sdpa-flash", *SMALL], tmp_path)
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "sm__no_such_counter_anywhere" in lines[0] and f"{bad}:8" in lines[0], lines[0]
    assert "does not know metric" in lines[0]


def test_nothing_profiled_is_an_error_that_says_why(tmp_path: Path) -> None:
    _ncu_or_skip()
    rc, _, err = _run(["--recipe", "tensor-core", "--backend", "sdpa-flash", "--kernel", "^no_such_kernel$",
                       *SMALL], tmp_path)
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "profiled no kernel" in lines[0] and "no_such_kernel" in lines[0], err


def test_module_and_ncu_import_read_the_same(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    _ncu_or_skip()
    from profctl.readers import ncu_rep

    rc, out, err = _run(["--recipe", "speed-of-light", "--backend", "sdpa-flash", *SMALL, "--format", "json"],
                        tmp_path)
    assert rc == 0, err
    rep = Path(json.loads(out)["summary"]["sources"][0]["path"])
    from profctl.inputs import ncu_import_launches

    a, _, _ = ncu_rep.read_launches(rep)
    b, _, _ = ncu_import_launches(rep)
    assert [x.base_name for x in a] == [x.base_name for x in b]
    assert [x.nvtx for x in a] == [x.nvtx for x in b]
    for x, y in zip(a, b, strict=True):
        for k in set(x.metrics) & set(y.metrics):
            assert x.metrics[k] == pytest.approx(y.metrics[k], rel=1e-3, abs=0.006), k
