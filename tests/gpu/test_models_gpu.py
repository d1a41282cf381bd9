"""The model workload on a GPU: bench rows with MFU and attention's share; nsys breaking a step into its parts;
ncu profiling only the attention kernels inside the model (forward and backward); torch.profiler on a step.
Run on the GPU machine: python3 -m pytest -m gpu tests/gpu/test_models_gpu.py"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytestmark = pytest.mark.gpu
SMALL = ["--model", "llama-7b", "--layers", "1", "--seqlen", "1024", "--batch", "1", "--warmup", "1"]


def invoke(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, [args[0], "--reports", str(tmp_path), *args[1:]])
    return r.exit_code, r.stdout, r.stderr


def test_bench_model_rows(tmp_path: Path) -> None:
    rc, out, err = invoke(["bench", *SMALL, "--mode", "train,prefill,decode", "-b", "sdpa-cudnn,eager",
                           "--iters", "3", "-f", "json"], tmp_path)
    assert rc == 0, err
    rows = json.loads(out)
    assert all(r["status"] == "ok" for r in rows), [(r["backend"], r["mode"], r.get("reason")) for r in rows]
    for r in rows:
        assert 0 < r["mfu"] < 1 and 0 < r["attn_share"] < 1 and r["peak_mem_bytes"] > 0
    train = {r["backend"]: r for r in rows if r["mode"] == "train"}
    assert train["eager"]["attn_share"] > train["sdpa-cudnn"]["attn_share"]


def test_memory_limit_makes_oom_rows(tmp_path: Path) -> None:
    rc, out, err = invoke(["bench", "--model", "llama-7b", "--layers", "2", "--seqlen", "16384", "--mode", "train",
                           "-b", "eager,sdpa-flash", "--memory-limit", "24", "--iters", "2", "-f", "json"], tmp_path)
    assert rc == 0, err  # one point ran
    rows = {r["backend"]: r for r in json.loads(out)}
    assert rows["eager"]["status"] == "oom", rows["eager"]  # the score matrices do not fit 24 GiB
    assert rows["sdpa-flash"]["status"] == "ok" and rows["sdpa-flash"]["peak_mem_bytes"] < 24 * 2**30


def test_nsys_breaks_a_step_into_parts(tmp_path: Path) -> None:
    rc, out, err = invoke(["nsys", *SMALL, "--mode", "train", "-b", "sdpa-flash", "--iters", "2", "--by-range",
                           "-f", "json"], tmp_path)
    if rc == 3:
        pytest.skip(err)
    assert rc == 0, err
    ranges = {r["name"] for r in json.loads(out)["ranges"]}
    assert {"attn.core", "mlp", "optimizer", "backward"} <= ranges


def test_ncu_profiles_the_attention_kernels_inside_the_model(tmp_path: Path) -> None:
    rc, out, err = invoke(["ncu", *SMALL, "--mode", "train", "-b", "sdpa-flash", "--clock-control", "none",
                           "-f", "json"], tmp_path)
    if rc == 3:
        pytest.skip(err)
    assert rc == 0, err
    launches = json.loads(out)["summary"]["meta"]["launches"]
    names = {ln["kernel"] for ln in launches}
    assert any("flash_fwd" in n for n in names) and any("flash_bwd" in n for n in names), names
    assert all("attn.core" in (ln["nvtx_range"] or "") for ln in launches)


def test_torch_profiles_a_model_step(tmp_path: Path) -> None:
    rc, out, err = invoke(["torch", *SMALL, "--mode", "prefill", "-b", "sdpa-cudnn", "--iters", "2", "--range",
                           "attn.core", "-f", "json"], tmp_path)
    assert rc == 0, err
    ks = json.loads(out)["kernels"]
    assert ks and any(k["kernel_class"] == "flash_fwd" for k in ks)
