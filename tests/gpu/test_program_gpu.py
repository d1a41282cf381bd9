"""Users' own code on a GPU: `profctl nsys|ncu|torch -- python examples/my_program.py` (its own NVTX ranges in a
custom domain, a start/end range and a Triton kernel), --range selection, and a user's attention function as a
backend under nsys and ncu. Run on the GPU machine: python3 -m pytest -m gpu tests/gpu/test_program_gpu.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
PROGRAM = [sys.executable, str(ROOT / "examples" / "my_program.py"), "--steps", "3", "--seqlen", "1024"]


def invoke(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, [args[0], "--reports", str(tmp_path), *args[1:]])
    return r.exit_code, r.stdout, r.stderr


def _tool(name: str) -> None:
    from profctl.errors import ToolNotFound

    mod = __import__(f"profctl.tools.{name}", fromlist=["find"])
    try:
        mod.find()
    except ToolNotFound as e:
        pytest.skip(str(e))


def test_nsys_whole_program_and_a_range(tmp_path: Path) -> None:
    _tool("nsys")
    rc, out, err = invoke(["nsys", "-f", "json", "--", *PROGRAM], tmp_path / "all")
    assert rc == 0, err
    names = [k["name"] for k in json.loads(out)["kernels"]]
    assert any("_scale_add" in n for n in names), names  # the program's own Triton kernel
    rc, out, err = invoke(["nsys", "-f", "json", "--range", "myapp@attention", "--", *PROGRAM], tmp_path / "rng")
    assert rc == 0, err
    ks = json.loads(out)["kernels"]
    assert ks and all("attention" in k["nvtx_range"] for k in ks)
    assert sum(k["count"] for k in ks if k["kernel_class"] == "flash_fwd") == 3  # one per step, warm-up not in it
    assert not any("_scale_add" in k["name"] for k in ks)


def test_nsys_range_that_matched_nothing_lists_the_ranges(tmp_path: Path) -> None:
    _tool("nsys")
    rc, _, err = invoke(["nsys", "--range", "nosuch", "--", *PROGRAM], tmp_path)
    assert rc != 0 and "attention" in err and "mlp" in err and "nosuch" in err


def test_ncu_range_and_kernel_filters(tmp_path: Path) -> None:
    _tool("ncu")
    rc, out, err = invoke(["ncu", "--recipe", "tensor-core", "--clock-control", "none", "--range", "myapp@attention",
                           "-f", "json", "--", *PROGRAM], tmp_path / "rng")
    assert rc == 0, err
    launches = json.loads(out)["summary"]["meta"]["launches"]
    assert len(launches) == 3 and all("attention" in (ln["nvtx_range"] or "") for ln in launches), launches
    rc, out, err = invoke(["ncu", "--recipe", "speed-of-light", "--clock-control", "none", "--kernel", "_scale_add",
                           "--launch-skip", "1", "--launch-count", "1", "-f", "json", "--", *PROGRAM], tmp_path / "k")
    assert rc == 0, err
    (ln,) = json.loads(out)["summary"]["meta"]["launches"]
    assert "_scale_add" in ln["kernel"]


def test_ncu_nothing_matched_names_what_the_program_launched(tmp_path: Path) -> None:
    _tool("ncu")
    rc, _, err = invoke(["ncu", "--clock-control", "none", "--range", "nosuch", "--", *PROGRAM], tmp_path)
    assert rc != 0
    (line,) = err.strip().splitlines()
    assert "nosuch" in line and "launched kernels" in line


def test_torch_program_on_the_gpu(tmp_path: Path) -> None:
    rc, out, err = invoke(["torch", "-f", "json", "--range", "mlp", "--", *PROGRAM], tmp_path)
    assert rc == 0, err
    names = [k["name"] for k in json.loads(out)["kernels"]]
    assert any("_scale_add" in n for n in names), names


def test_program_failure_keeps_the_report(tmp_path: Path) -> None:
    _tool("nsys")
    rc, out, err = invoke(["nsys", "-f", "json", "--", *PROGRAM, "--exit-status", "5"], tmp_path)
    assert rc == 8 and "exited with status 5" in err
    assert json.loads(out)["kernels"]


def test_a_users_function_under_nsys_and_ncu(tmp_path: Path) -> None:
    _tool("nsys")
    ref = "torch.nn.functional:scaled_dot_product_attention"
    rc, out, err = invoke(["nsys", "--backend", f"{ref},eager", "--seqlen", "1024", "--iters", "3", "--warmup", "1",
                           "-f", "markdown"], tmp_path / "nsys")
    assert rc == 0, err
    assert "functional.scaled_dot_product_attention" in out and "x vs eager" in out
    _tool("ncu")
    rc, out, err = invoke(["ncu", "--backend", ref, "--seqlen", "1024", "--clock-control", "none", "-f", "json"],
                          tmp_path / "ncu")
    assert rc == 0, err
    launches = json.loads(out)["summary"]["meta"]["launches"]
    assert launches and all("functional.scaled_dot_product_attention" in (ln["nvtx_range"] or "")
                            for ln in launches)
