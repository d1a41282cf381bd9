"""The torch.profiler trace reader on real traces: the shared H100 fixture (recorded by a plain script, not by
profctl) and profctl's own GPU traces in tests/data. Expected numbers are computed here from the raw JSON."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profctl.errors import BadReport
from profctl.readers import torch_trace

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]  # type: ignore[no-any-return]


def _row_name(e: dict[str, Any]) -> str:
    if e["cat"] == "gpu_memset":
        return "[CUDA memset]"
    if e["cat"] == "gpu_memcpy":
        assert e["name"].startswith("Memcpy DtoD")
        return "[CUDA memcpy Device-to-Device]"
    return str(e["name"])


def _autograd_launched(ev: list[dict[str, Any]]) -> Counter[str]:
    """Per row name, the GPU activities whose launching runtime call ran on a thread named *autograd*."""
    autograd = {(e["pid"], e["tid"]) for e in ev
                if e.get("ph") == "M" and e.get("name") == "thread_name" and "autograd" in e["args"]["name"]}
    launch_thread = {e["args"]["correlation"]: (e["pid"], e["tid"]) for e in ev
                     if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out: Counter[str] = Counter()
    for e in ev:
        if e.get("cat") in GPU_CATS and launch_thread.get(e["args"]["correlation"]) in autograd:
            out[_row_name(e)] += 1
    return out


@pytest.fixture
def fixture_trace(shared_fixture: Callable[[str], Path]) -> Path:
    return shared_fixture("torch_trace.json.gz")


def test_fixture_kernel_counts_and_totals(fixture_trace: Path) -> None:
    ev = _events(fixture_trace)
    count: Counter[str] = Counter()
    total: defaultdict[str, float] = defaultdict(float)
    for e in ev:
        if e.get("cat") in GPU_CATS:
            count[_row_name(e)] += 1
            total[_row_name(e)] += e["dur"] * 1000.0
    assert sum(count.values()) == 69  # 49 kernels, 4 memcpy, 16 memset

    s = torch_trace.read(fixture_trace, notes=[])
    got = {k.name: k for k in s.kernels}
    assert set(got) == set(count)
    for name, k in got.items():
        assert k.count == count[name], name
        assert k.total_ns == pytest.approx(total[name], rel=1e-9), name
        assert k.nvtx_range is None
    flash_fwd = next(k for n, k in got.items() if "flash_fwd_kernel" in n)
    assert flash_fwd.kernel_class == "flash_fwd" and flash_fwd.count == 2
    assert s.meta["gpu_activity"] is True and s.meta["gpu_ops_unattributed"] == 0
    assert s.sources[0].tool == "torch"


def test_fixture_forward_backward_attribution(fixture_trace: Path) -> None:
    """The fixture has no user_annotation ranges (its NVTX ranges are not in a torch trace); what it does tie a
    kernel to: the pass (backward kernels come from autograd's thread), the op that launched it, and for backward
    kernels the forward op of their autograd node (fwdbwd flow)."""
    ev = _events(fixture_trace)
    assert not [e for e in ev if e.get("cat") == "user_annotation"]
    bwd = _autograd_launched(ev)
    s = torch_trace.read(fixture_trace, by_range=True, notes=[])
    assert s.ranges == ()
    for k in s.kernels:
        assert k.nvtx_range is None
        assert k.extra["pass"].get("bwd", 0) == bwd[k.name], k.name
        assert k.extra["pass"].get("fwd", 0) == k.count - bwd[k.name], k.name
    by = {k.short_name: k for k in s.kernels}
    for name in ("flash_bwd_dot_do_o_kernel", "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
                 "flash_bwd_convert_dq_kernel"):
        k = by[name]
        assert k.kernel_class == "flash_bwd"
        assert k.extra["pass"] == {"bwd": 2}
        assert k.extra["ops"] == {"ScaledDotProductFlashAttentionBackward0": 2}
        assert k.extra["fwd_ops"] == {"aten::_scaled_dot_product_flash_attention": 2}
    fwd = by["flash_fwd_kernel"]
    assert fwd.extra["pass"] == {"fwd": 2}
    assert fwd.extra["ops"] == {"aten::scaled_dot_product_attention": 2}
    assert fwd.extra["launch_ops"] == {"aten::_flash_attention_forward": 2}
    soft_bwd = next(k for k in s.kernels if "SoftMaxBackward" in k.name)
    assert soft_bwd.extra["fwd_ops"] == {"aten::_softmax": 2}


@pytest.mark.parametrize("name", ["torch_profctl_gpu_nvtx.json.gz", "torch_profctl_gpu_nonvtx.json.gz"])
def test_profctl_gpu_trace_ranges(data_file: Callable[[str], Path], name: str) -> None:
    """profctl's ranges: forward kernels in <backend>.fwd, backward ones (launched by autograd's thread, with or
    without ranges opened on that thread) in <backend>.bwd, and only the 2 measured iterations."""
    path = data_file(name)
    ev = _events(path)
    bwd = _autograd_launched(ev)
    s = torch_trace.read(path, by_range=True, notes=[])
    assert s.meta["gpu_ops_unattributed"] == 0
    in_bwd: Counter[str] = Counter()
    for k in s.kernels:
        assert k.nvtx_range, k.name
        case, phase, leaf = k.nvtx_range.split("/")
        backend = case.split("[")[0]
        assert phase == "measure" and leaf in (f"{backend}.fwd", f"{backend}.bwd")
        assert k.extra["pass"] == {leaf.rsplit(".", 1)[1]: k.count}
        if leaf.endswith(".bwd"):
            in_bwd[k.name] += k.count
    assert in_bwd == bwd
    flash = {k.short_name: k for k in s.kernels if k.nvtx_range and k.nvtx_range.startswith("sdpa-flash[")}
    assert flash["flash_fwd_kernel"].count == 2 and flash["flash_fwd_kernel"].nvtx_range.endswith("sdpa-flash.fwd")
    assert flash["flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel"].nvtx_range.endswith("sdpa-flash.bwd")
    ranges = {r.name: r for r in s.ranges}
    assert ranges["sdpa-flash.fwd"].gpu_ops == 2
    assert ranges["sdpa-flash.bwd"].gpu_ops == sum(
        k.count for k in s.kernels if k.nvtx_range and k.nvtx_range.endswith("sdpa-flash.bwd"))
    assert (s.meta["launches_borrowed_range"] > 10) == ("nonvtx" in name)


def test_gzip_plain_and_small_chunks_agree(fixture_trace: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(fixture_trace.read_bytes()))
    a = torch_trace.read(fixture_trace, by_range=True, notes=[])
    b = torch_trace.read(plain, by_range=True, notes=[])
    monkeypatch.setattr(torch_trace, "CHUNK_CHARS", 7)  # every event straddles window ends
    c = torch_trace.read(plain, by_range=True, notes=[])
    strip = lambda s: [k for k in s.to_dict()["kernels"]]  # noqa: E731
    assert strip(a) == strip(b) == strip(c)


def test_array_format_without_closing_bracket(fixture_trace: Path, tmp_path: Path) -> None:
    ev = _events(fixture_trace)
    p = tmp_path / "array.json"
    p.write_text("[\n" + ",\n".join(json.dumps(e) for e in ev) + ",\n")  # Chrome allows the open end
    s = torch_trace.read(p, notes=[])
    assert sum(k.count for k in s.kernels) == 69


def test_cpu_only_trace_holds_cpu_ops_not_kernels(tmp_path: Path) -> None:
    """issue 17: a CPU-only trace's ops go to Summary.cpu_ops, never among the kernels, and the summary says
    what the trace holds; old summary JSON with CPU ops listed as kernels still reads, into cpu_ops."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(32, 32)
    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("outer"):
        for _ in range(3):
            with record_function("inner"):
                torch.mm(x, x)
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    notes: list[str] = []
    s = torch_trace.read(path, by_range=True, notes=notes)
    assert len(notes) == 1 and "no GPU activity" in notes[0] and "CPU ops only" in notes[0]
    assert s.meta["gpu_activity"] is False and s.meta["holds"] == "cpu_ops_only"
    assert any("CPU ops only" in w for w in s.warnings)
    assert s.kernels == ()
    mm = [c for c in s.cpu_ops if c.name == "aten::mm"]
    assert [(c.nvtx_range, c.count) for c in mm] == [("outer/inner", 3)]
    assert mm[0].op_class == "gemm" and mm[0].cpu_total_ns >= mm[0].total_ns > 0
    assert {r.name: r.count for r in s.ranges} == {"outer": 1, "inner": 3}
    assert all(r.gpu_proj_total_ns is None for r in s.ranges)
    # JSON round trip; and a summary written before cpu_ops existed (CPU ops as kernels) reads into cpu_ops
    import json

    from profctl.schema import Summary

    d = json.loads(s.to_json())
    assert Summary.from_dict(d) == s
    old = dict(d)
    old["kernels"] = [{"tool": "torch", "name": c["name"], "short_name": c["name"], "kernel_class": c["op_class"],
                       "nvtx_range": c["nvtx_range"], "count": c["count"], "total_ns": c["total_ns"],
                       "avg_ns": c["avg_ns"], "med_ns": c["med_ns"], "min_ns": c["min_ns"], "max_ns": c["max_ns"],
                       "std_ns": c["std_ns"], "metrics": {},
                       "extra": {"device": "cpu", "time": "self", "cpu_total_ns": c["cpu_total_ns"]}}
                      for c in d["cpu_ops"]]
    del old["cpu_ops"]
    back = Summary.from_dict(old)
    assert back.kernels == () and [(c.name, c.nvtx_range, c.count, c.cpu_total_ns) for c in back.cpu_ops] == [
        (c.name, c.nvtx_range, c.count, c.cpu_total_ns) for c in s.cpu_ops]


@pytest.mark.parametrize(("content", "message"), [
    (b"{ this is not json", "not JSON"),
    (b'{"schemaVersion": 1, "other": [1, 2]}', "not a torch.profiler/Chrome trace"),
    (b'{"traceEvents": []}', "no events"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "cat": "custom"}]}',
     "without torch.profiler events"),
    (b"", "not JSON"),
])
def test_bad_input_is_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(BadReport, match=message) as ei:
        torch_trace.read(p, notes=[])
    assert "\n" not in ei.value.one_line()


def test_truncated_json_and_gzip(fixture_trace: Path, tmp_path: Path) -> None:
    raw = gzip.decompress(fixture_trace.read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(BadReport, match="truncated trace"):
        torch_trace.read(cut, notes=[])
    cutgz = tmp_path / "cut.json.gz"
    data = fixture_trace.read_bytes()
    cutgz.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadReport, match="truncated"):
        torch_trace.read(cutgz, notes=[])
