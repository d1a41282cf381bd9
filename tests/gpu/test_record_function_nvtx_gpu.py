"""--record-function-nvtx on the GPU (issue 21, class 9): a Python program that marks its steps only with
torch.profiler.record_function, profiled with nsys and ncu. Without the option `--range beta` matches nothing
and the error says which option helps; with it the kernels launched inside `beta` are the ones selected. Run on
the GPU machine: python3 -m pytest -m gpu tests/gpu/test_record_function_nvtx_gpu.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytestmark = pytest.mark.gpu

PROGRAM = '''
import torch
from torch.profiler import record_function

x = torch.randn(1024, 1024, device="cuda")
for _ in range(3):
    with record_function("alpha"):
        y = torch.relu(x)
    with record_function("beta"):
        z = x @ x
torch.cuda.synchronize()
'''


def _tool(name: str) -> None:
    from profctl.errors import ToolNotFound

    mod = __import__(f"profctl.tools.{name}", fromlist=["find"])
    try:
        mod.find()
    except ToolNotFound as e:
        pytest.skip(str(e))


def _invoke(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    prog = tmp_path / "steps.py"
    prog.write_text(PROGRAM)
    r = CliRunner().invoke(app, [args[0], "--reports", str(tmp_path / "runs"), *args[1:], "--", sys.executable,
                                 str(prog)])
    return r.exit_code, r.stdout, r.stderr


def test_nsys_sees_record_function_ranges_with_the_option(tmp_path: Path) -> None:
    _tool("nsys")
    rc, _, err = _invoke(["nsys", "--range", "beta"], tmp_path / "without")
    assert rc != 0 and "--record-function-nvtx" in err, err
    rc, out, err = _invoke(["nsys", "--record-function-nvtx", "--range", "beta", "-f", "json"], tmp_path / "with")
    assert rc == 0, err
    ks = json.loads(out)["kernels"]
    assert ks and all("beta" in (k["nvtx_range"] or "") for k in ks), ks
    assert any(k["kernel_class"] == "gemm" for k in ks), ks  # x @ x, in beta
    assert not any("relu" in k["name"].lower() or "clamp" in k["name"].lower() for k in ks), ks  # relu: in alpha


def test_ncu_profiles_only_launches_inside_a_record_function_range(tmp_path: Path) -> None:
    _tool("ncu")
    rc, out, err = _invoke(["ncu", "--recipe", "speed-of-light", "--clock-control", "none", "--record-function-nvtx",
                            "--range", "beta", "-f", "json"], tmp_path)
    assert rc == 0, err
    launches = json.loads(out)["summary"]["meta"]["launches"]
    assert len(launches) >= 3 and len(launches) % 3 == 0, launches  # the matmul's kernel(s), once a step
    assert all("beta" in (ln["nvtx_range"] or "") for ln in launches), launches
