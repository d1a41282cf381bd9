"""The attention workload on the CPU: correctness against the float64 reference, alignment, skips, passes."""

import json
from pathlib import Path

import pytest
import torch

from profctl.spec import AttentionSpec
from profctl.workloads import backends
from profctl.workloads.attention import main, reference, rel_error, run_case

SMALL = dict(batch=1, seqlen_q=32, seqlen_kv=32, heads=4, kv_heads=4, head_dim=16, dtype="fp32", device="cpu")


def run(spec: AttentionSpec, **kw) -> dict:
    return run_case(spec, warmup=1, iters=2, nvtx=False, check=True, flush_l2=False, **kw)


@pytest.mark.parametrize("backend", ["eager", "sdpa-flash", "sdpa-math"])
@pytest.mark.parametrize("pass_", ["fwd", "bwd", "fwd+bwd"])
def test_cpu_backends_run_and_match_reference(backend: str, pass_: str) -> None:
    row = run(AttentionSpec(backend=backend, pass_=pass_, causal=True, **SMALL))
    assert row["status"] == "ok", row
    assert row["check"] == "pass" and row["rel_error"] < 1e-5
    assert row["iters"] == 2 and len(row["times_ms"]) == 2 and row["median_ms"] > 0
    if pass_ == "fwd+bwd":
        assert row["fwd_median_ms"] > 0 and row["bwd_median_ms"] > 0


@pytest.mark.parametrize(("sq", "skv"), [(16, 48), (48, 16)])
def test_causal_alignment_of_reference_differs_by_backend(sq: int, skv: int) -> None:
    """The reference follows each backend's alignment; eager (top-left) matches only the top-left reference."""
    kw = {**SMALL, "seqlen_q": sq, "seqlen_kv": skv, "causal": True}
    eager = AttentionSpec(backend="eager", **kw)
    fa_like = AttentionSpec(backend="fa4", **kw)  # bottom-right, used here only for its reference mask
    from profctl.workloads.attention import inputs

    q, k, v, _ = inputs(eager, False, 0)
    out = backends.load("eager")(q, k, v, is_causal=True)
    assert rel_error(out, reference(eager, q, k, v)) < 1e-5
    assert rel_error(out, reference(fa_like, q, k, v)) > 1e-2


def test_bottom_right_reference_zeroes_rows_without_keys() -> None:
    spec = AttentionSpec(backend="fa4", **{**SMALL, "seqlen_q": 8, "seqlen_kv": 4, "causal": True})
    from profctl.workloads.attention import inputs

    q, k, v, _ = inputs(spec.with_(backend="eager"), False, 0)
    ref = reference(spec, q, k, v)
    assert torch.all(ref[:, :, :4] == 0)          # rows 0..3 see no key (offset -4)
    assert torch.all(ref[:, :, 4:].abs().sum(-1) > 0)


def test_gqa_and_layouts_agree() -> None:
    for layout in ("bhsd", "bshd"):
        for backend in ("eager", "sdpa-math", "sdpa-flash"):
            row = run(AttentionSpec(backend=backend, **{**SMALL, "heads": 8, "kv_heads": 2, "layout": layout}))
            assert row["status"] == "ok" and row["check"] == "pass", (layout, backend, row)


@pytest.mark.parametrize("backend", ["eager", "sdpa-flash", "sdpa-math", "sdpa-cudnn", "sdpa-efficient", "fa4",
                                     "flash-attn"])
def test_what_the_up_front_check_knows_agrees_with_the_workload(backend: str) -> None:
    """profctl.spec.device_refusal (the CLI's check before a run) refuses on the CPU exactly the built-ins the
    workload itself refuses there (issue 29 item 10)."""
    from profctl.spec import device_refusal

    row = run(AttentionSpec(backend=backend, **SMALL))
    assert (device_refusal(backend, "cpu") is not None) == (row["status"] == "unsupported"), row
    assert device_refusal(backend, "cuda") is None


def test_triton_on_the_cpu_needs_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    from profctl.spec import device_refusal

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert "TRITON_INTERPRET=1" in (device_refusal("triton", "cpu") or "")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert device_refusal("triton", "cpu") is None


@pytest.mark.parametrize(("backend", "needle"), [
    ("sdpa-cudnn", "CUDA only"),
    ("sdpa-efficient", "CUDA only"),
    ("fa4", "FlashAttention-4"),
    ("flash-attn", "flash"),
])
def test_unavailable_backends_are_skipped_with_the_reason(backend: str, needle: str) -> None:
    row = run(AttentionSpec(backend=backend, **SMALL))
    assert row["status"] == "unsupported"
    assert needle.lower() in row["reason"].lower()
    assert "median_ms" not in row


def test_cuda_requested_without_gpu_is_unsupported() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    row = run(AttentionSpec(backend="eager", **{**SMALL, "device": "cuda"}))
    assert row["status"] == "unsupported" and "CUDA" in row["reason"]


def test_child_main_writes_start_and_row_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "e.jsonl"
    rc = main(["--backend", "eager,sdpa-cudnn", "--device", "cpu", "--seqlen", "16", "--heads", "2",
               "--head-dim", "8", "--dtype", "fp32", "--iters", "2", "--warmup", "0", "--jsonl", str(events)])
    assert rc == 0
    evs = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["event"] for e in evs] == ["device", "start", "row", "start", "row"]
    assert evs[2]["status"] == "ok" and evs[4]["status"] == "unsupported"
    out = capsys.readouterr().out
    assert "eager[b1,sq16,skv16,h2,kv2,d8,fp32,full,bhsd] fwd: median" in out


def test_child_main_bad_option_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--backend", "eager", "--heads", "6", "--kv-heads", "4", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --kv-heads 4 does not divide --heads 6"]


def test_child_exit_is_nonzero_when_no_case_ran(tmp_path: Path) -> None:
    assert main(["--backend", "sdpa-cudnn", "--device", "cpu", "--seqlen", "16", "--heads", "2",
                 "--head-dim", "8", "--dtype", "fp32", "--iters", "1"]) == 1
