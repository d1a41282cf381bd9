"""Proton timelines at scale (issue 40): a trace of a few hundred MB read in one streaming pass under an
address-space limit, with the per-scope counts and totals its generator wrote; Proton's raw buffer read as
profctl's workload child reads it (headers, the CTAs kept, exact counts over all CTAs, the buffer cut down),
on a buffer laid out as Triton 3.6 lays it out; and a sampled timeline made whole by the child's tallies."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import ClassVar

import pytest

from profctl.analysis import timeline
from profctl.readers import proton_trace, proton_tree
from tests.conftest import DATA, ROOT

torch = pytest.importorskip("torch")
from profctl.workloads import proton_ctas  # noqa: E402  (after torch: the module's functions need it)

PROTON = DATA / "proton"


def _scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("proton_scale", ROOT / "benchmarks" / "proton_scale.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["proton_scale"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_trace_of_hundreds_of_mb_reads_in_bounded_memory(tmp_path: Path) -> None:
    bench = _scale()
    path = tmp_path / "big.chrome_trace"
    want = bench.generate(path, ctas=640)  # 800 k scope instances
    assert path.stat().st_size > 200e6
    got = bench.read_in_child(path, ROOT, limit_as=1536 << 20)
    assert "error" not in got, got
    assert got["ctas"] == 640 and got["events"] == sum(want["counts"].values())
    assert got["counts"] == want["counts"] and got["totals"] == want["totals"]


# ---------------------------------------------------------------------------------------- the raw buffer
UNITS = 4
SEG = 16  # records per warp segment
PAD = 72  # the region's padding after the records, as an H200 with Triton 3.6 pads 4 warps' (proton_buffer_probe)
SCRATCH = 40 + 4 * UNITS + UNITS * SEG * 8 + PAD


def _region(cta: int, sm: int, init: int, span: int, per_warp: list[list[tuple[int, bool, int]]],
            counts: list[int] | None = None, *, timed: bool = True, pad: int = PAD) -> bytes:
    """One CTA's region as Triton 3.6 writes it: header (with the CTA's times unless `timed` is false), each
    warp's write index in words (two a record), each warp's records, the padding."""
    counts = counts if counts is not None else [2 * len(r) for r in per_warp]
    head = struct.pack("<4I", proton_ctas.PREAMBLE, cta, sm, UNITS * SEG * 8)
    if timed:
        head += struct.pack("<3Q", init, init + span, init + span + 99)
    head += struct.pack(f"<{UNITS}I", *counts)
    body = b""
    for recs in per_warp:
        seg = b"".join(struct.pack("<II", (0 if start else 1 << 31) | (scope << 23) | (clk >> 32 & 0x7FF),
                                   clk & 0xFFFFFFFF) for scope, start, clk in recs[:SEG])
        body += seg + b"\0" * (SEG * 8 - len(seg))
    return head + body + b"\0" * pad


def _warp(n: int, t0: int = 1 << 33) -> list[tuple[int, bool, int]]:
    """`n` instances of scope 1 (5 cycles each) then one of scope 2 (7 cycles), from cycle t0 (past 32 bits)."""
    out, t = [], t0
    for _ in range(n):
        out += [(1, True, t), (1, False, t + 5)]
        t += 10
    return [*out, (2, True, t), (2, False, t + 7)]


def _buffer(ctas: int, sms: int) -> tuple[object, list[int]]:
    regions, spans = [], []
    for c in range(ctas):
        span = 1000 + (500 if c == 7 else c)
        spans.append(span)
        regions.append(_region(c, c % sms, 10_000 + c, span, [_warp(3) for _ in range(UNITS)]))
    return torch.frombuffer(bytearray(b"".join(regions)), dtype=torch.uint8), spans


def test_headers_choice_tally_and_the_cut_buffer() -> None:
    buf, _ = _buffer(24, 6)
    h = proton_ctas.read_headers(buf, SCRATCH, UNITS)
    assert h.layout == "timed" and h.cta == list(range(24)) and h.sm == [c % 6 for c in range(24)]
    assert h.span_ns is not None and max(range(24), key=lambda i: h.span_ns[i]) == 7  # type: ignore[index,unused-ignore]
    pick = proton_ctas.choose(h, 8)
    assert pick.total == 24 and pick.sm_count == 6 and pick.longest == 7
    assert len(pick.sms) == 2 and all(c % 6 in pick.sms or c == 7 for c in pick.ctas)
    assert {c for c in range(24) if c % 6 in pick.sms} <= set(pick.ctas)
    got = proton_ctas.tally(buf, h, list(range(UNITS)))
    assert got["counts"] == {1: 24 * UNITS * 3, 2: 24 * UNITS} and got["overflowed"] is False
    assert got["cycles"] == {1: 24 * UNITS * 3 * 5, 2: 24 * UNITS * 7}  # 64-bit clocks, upper bits kept
    cut = proton_ctas.compact(buf, h, pick.rows)
    assert cut.numel() == len(pick.rows) * SCRATCH
    again = proton_ctas.read_headers(cut, SCRATCH, UNITS)
    assert again.cta == pick.ctas  # the regions say which CTA they are, wherever they lie


def test_an_overflowed_warp_counts_what_is_kept_and_no_totals() -> None:
    full = _warp(10)  # 22 records into a segment of 16: the buffer kept 16 of them
    region = _region(0, 0, 1, 50, [full] + [_warp(1)] * (UNITS - 1), counts=[44] + [8] * (UNITS - 1))
    buf = torch.frombuffer(bytearray(region), dtype=torch.uint8)
    h = proton_ctas.read_headers(buf, SCRATCH, UNITS)
    got = proton_ctas.tally(buf, h, list(range(UNITS)))
    assert got["overflowed"] is True and got["cycles"] is None
    assert got["counts"] == {1: 8 + (UNITS - 1), 2: UNITS - 1}


def test_a_header_without_times_or_padding_is_read_too() -> None:
    """Older Protons: no times in the header; and a region padded or not, the records start after the counts."""
    for pad in (0, 24):
        region = _region(2, 1, 1, 50, [_warp(2)] * UNITS, timed=False, pad=pad)
        scratch = 16 + 4 * UNITS + UNITS * SEG * 8 + pad
        h = proton_ctas.read_headers(torch.frombuffer(bytearray(region), dtype=torch.uint8), scratch, UNITS)
        assert h.layout == "v0" and h.meta == 16 + 4 * UNITS and h.span_ns is None
        got = proton_ctas.tally(torch.frombuffer(bytearray(region), dtype=torch.uint8), h, list(range(UNITS)))
        assert got["counts"] == {1: 2 * UNITS, 2: UNITS} and got["cycles"] == {1: 2 * UNITS * 5, 2: UNITS * 7}


def test_an_unknown_header_is_only_ids() -> None:
    region = _region(3, 5, 1, 50, [_warp(1)] * UNITS, pad=0)
    # a record area said to start 8 bytes in: no header fits before it
    region = region[:12] + struct.pack("<I", len(region) - 8) + region[16:]
    buf = torch.frombuffer(bytearray(region), dtype=torch.uint8)
    h = proton_ctas.read_headers(buf, len(region), UNITS)
    assert h.cta == [3] and h.sm == [5] and h.layout == "unknown" and h.counts is None
    assert proton_ctas.tally(buf, h, list(range(UNITS)))["counts"] is None
    assert "longest CTA cannot be told" in proton_ctas.choose(h, 1).how


def test_odd_counts_are_not_a_header() -> None:
    """Counts that are not write indexes (odd words: a timer's or a clock's) are not read as counts."""
    region = _region(0, 0, 1, 50, [_warp(1)] * UNITS, counts=[5, 8, 8, 8])
    h = proton_ctas.read_headers(torch.frombuffer(bytearray(region), dtype=torch.uint8), SCRATCH, UNITS)
    assert h.layout == "unknown" and h.counts is None


# ------------------------------------------------------------------------- a sampled timeline made whole
def test_a_sample_of_ctas_gets_the_launchs_counts_and_totals() -> None:
    trace = proton_trace.read(PROTON / "builtin_noncausal_16cta.chrome_trace.gz")
    plain = timeline.analyze(trace)
    rep = timeline.analyze(trace)
    k = rep.kernels[0]
    sample_counts = {s.name: s.count for s in k.scopes}
    counts = {n: (c or 0) * 64 for n, c in sample_counts.items()}  # as if the launch had 1,024 CTAs like these 16
    tree = proton_tree.ProtonTree(path="t", scopes=[proton_tree.TreeScope(k.kernel, ("softmax",), 123_456_789, 1.0)])
    timeline.apply_sample(rep, {"kernels": {k.kernel: {"ctas_total": 1024, "counts": counts, "cycles": None}},
                                "how": "every CTA of 2 of 132 SMs"}, tree)
    got = {s.name: s for s in k.scopes}
    assert {n: s.count for n, s in got.items()} == counts
    assert got["softmax"].total_cycles == 123_456_789
    old = {s.name: s for s in plain.kernels[0].scopes}
    assert got["qk"].total_cycles == round(old["qk"].total_cycles * 64)  # neither tree nor records: scaled
    assert got["qk"].share == old["qk"].share and k.overlaps == plain.kernels[0].overlaps  # the sample's
    assert k.ctas == 16 and k.ctas_total == 1024 and "16 of 1024 CTAs" in (k.sample or "")
    assert any("scaled from 16 of 1024" in w for w in rep.warnings)
    back = timeline.TimelineReport.from_dict(rep.to_dict())
    assert back.kernels[0].ctas_total == 1024 and back.kernels[0].sample == k.sample


def test_a_trace_of_every_cta_is_left_as_it_is() -> None:
    trace = proton_trace.read(PROTON / "chain.chrome_trace.gz")
    rep = timeline.analyze(trace)
    before = rep.to_dict()
    timeline.apply_sample(rep, {"kernels": {rep.kernels[0].kernel: {"ctas_total": rep.kernels[0].ctas,
                                                                    "counts": {}, "cycles": {}}}})
    assert rep.to_dict() == before


# ------------------------------------------------- the child's hook on Triton 3.6's own call path (stand-ins)
class _Triton36:
    """Stand-ins for Triton 3.6's launch path, as its source has it (triton 3.6.0 wheel):

    * knobs.py:406-424 HookChain; knobs.py:468-471 runtime.launch_enter_hook / launch_exit_hook(reversed) /
      kernel_load_end_hook(reversed);
    * compiler/compiler.py:470 CompiledKernel._init_handles calls kernel_load_end_hook ONCE per kernel, at its
      first launch; driver.py:700-713 the launcher allocates the profile scratch (the active hook's CudaAllocator
      keeps it as ``hook.buffer``, instrumentation.py:41), then (driver.py:519-556) calls launch_enter_hook and
      launch_exit_hook with the launch metadata (a LazyDict: ``.data`` name, function, stream);
    * hooks/hook.py:33-128 HookManager (register adds HookManager.init_handle / enter / exit to those chains;
      exit calls ``hook.exit(metadata)`` on every active hook instance);
    * profile.py:110-115 proton.start makes a NEW InstrumentationHook per session; instrumentation.py:138-144 its
      ``metadata_path`` starts empty and only its init_handle (a load) fills it; finalize -> HookManager.unregister.
    """

    def __init__(self, buf: object, group: dict[str, str]) -> None:
        self.calls: list[tuple[object, int, int]] = []  # libproton.exit_instrumented_op(func, ptr, bytes)
        self.buf, self.group, self.loaded, self.session = buf, group, False, 0

        class HookChain:
            def __init__(self, reversed: bool = False) -> None:
                self.calls: list = []
                self.reversed = reversed

            def add(self, func: object) -> None:
                if func not in self.calls:
                    self.calls.append(func)

            def remove(self, func: object) -> None:
                if func in self.calls:
                    self.calls.remove(func)

            def __call__(self, *args: object) -> None:
                for call in self.calls if not self.reversed else reversed(self.calls):
                    call(*args)

        self.runtime = runtime = SimpleNamespace(launch_enter_hook=HookChain(),
                                                 launch_exit_hook=HookChain(reversed=True),
                                                 kernel_load_end_hook=HookChain(reversed=True))
        calls = self.calls
        self.libproton = libproton = SimpleNamespace(
            exit_instrumented_op=lambda stream, func, ptr, size: calls.append((func, ptr, size)),
            enter_instrumented_op=lambda *a: None)
        t36 = self

        class InstrumentationHook:
            priority = 0

            def __init__(self, mode: object) -> None:
                self.buffer = None
                self.metadata_path: dict = {}

            def activate(self) -> None:
                t36.allocator = self

            def deactivate(self) -> None:
                self.buffer = None

            def init_handle(self, module: object, function: object, name: str, metadata_group: dict,
                            hash: str) -> None:
                if not function:
                    return
                self.metadata_path[function] = next((p for k, p in metadata_group.items() if k.endswith("json")),
                                                    None)

            def enter(self, metadata: object) -> None:
                pass

            def exit(self, metadata: object) -> None:
                d = metadata.data  # type: ignore[attr-defined]
                libproton.exit_instrumented_op(d["stream"], d["function"],
                                               0 if self.buffer is None else self.buffer.data_ptr(),
                                               0 if self.buffer is None else self.buffer.numel())

        class HookManager:
            active_hooks: ClassVar[list] = []

            @staticmethod
            def init_handle(*args: object) -> None:
                for hook in HookManager.active_hooks:
                    hook.init_handle(*args)

            @staticmethod
            def enter(metadata: object) -> None:
                for hook in HookManager.active_hooks:
                    hook.enter(metadata)

            @staticmethod
            def exit(metadata: object) -> None:
                for hook in reversed(HookManager.active_hooks):
                    hook.exit(metadata)

            @staticmethod
            def register(hook: object) -> None:
                hook.activate()  # type: ignore[attr-defined]
                HookManager.active_hooks.append(hook)
                runtime.kernel_load_end_hook.add(HookManager.init_handle)
                runtime.launch_enter_hook.add(HookManager.enter)
                runtime.launch_exit_hook.add(HookManager.exit)

            @staticmethod
            def unregister() -> None:
                for hook in HookManager.active_hooks:
                    hook.deactivate()
                HookManager.active_hooks.clear()
                runtime.kernel_load_end_hook.remove(HookManager.init_handle)
                runtime.launch_enter_hook.remove(HookManager.enter)
                runtime.launch_exit_hook.remove(HookManager.exit)

        self.InstrumentationHook, self.HookManager = InstrumentationHook, HookManager
        self.allocator: object = None

    def modules(self) -> dict[str, ModuleType]:
        m = {n: ModuleType(n) for n in ("triton", "triton.knobs", "triton._C", "triton._C.libproton",
                                         "triton.profiler", "triton.profiler.hooks",
                                         "triton.profiler.hooks.instrumentation", "triton.profiler.hooks.hook")}
        m["triton.knobs"].runtime = self.runtime  # type: ignore[attr-defined]
        m["triton._C.libproton"].proton = self.libproton  # type: ignore[attr-defined]
        m["triton.profiler.hooks.instrumentation"].InstrumentationHook = self.InstrumentationHook  # type: ignore
        m["triton.profiler.hooks.hook"].HookManager = self.HookManager  # type: ignore[attr-defined]
        for name, mod in m.items():
            if "." in name:
                parent, _, leaf = name.rpartition(".")
                setattr(m[parent], leaf, mod)
        return m

    def start(self) -> None:  # proton.start(..., backend="instrumentation")
        self.session += 1
        self.HookManager.register(self.InstrumentationHook(None))

    def finalize(self) -> None:
        self.HookManager.unregister()

    def launch(self) -> None:  # JITFunction.run -> CompiledKernel -> CudaLauncher
        fn = 0x7F00
        if not self.loaded:  # _init_handles: the load hooks, once per kernel
            self.loaded = True
            self.runtime.kernel_load_end_hook(None, fn, "twice", self.group, "h")
        if self.allocator is not None:
            self.allocator.buffer = self.buf  # type: ignore[attr-defined]
        md = SimpleNamespace(data={"name": "twice", "function": fn, "stream": 0})
        self.runtime.launch_enter_hook(md)
        self.runtime.launch_exit_hook(md)


@pytest.fixture
def triton36(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[_Triton36, ModuleType]:
    meta = tmp_path / "twice.json"
    meta.write_text(json.dumps({"profile_scratch_size": SCRATCH, "num_warps": UNITS, "name": "twice"}))
    buf, _ = _buffer(32, 8)
    t = _Triton36(buf, {"twice.json": str(meta)})
    for name, mod in t.modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    from profctl.workloads import proton_run

    monkeypatch.setattr(proton_run, "_POLICY", None)
    monkeypatch.setattr(proton_run, "_LOADED", {})
    monkeypatch.setattr(proton_run, "_SCOPE_NAMES", {})
    return t, proton_run


def test_the_sample_takes_effect_when_the_kernel_loaded_in_an_earlier_session(triton36: tuple) -> None:
    """profctl proton --ctas N on a case: the scoped kernel compiles (and loads) in a first session, and the
    recorded launch is in the third, whose new InstrumentationHook never saw the load (the H200 failure: the
    manifest's sample had 0 launches and the trace every CTA)."""
    t, pr = triton36
    pr.install_hook()
    pr._POLICY = "discard"
    t.start()
    t.launch()
    t.finalize()
    assert t.calls[-1] == (0x7F00, 0, 0)  # the compile launch's records: none parsed
    pr._POLICY = None
    t.start()
    t.launch()
    t.finalize()
    assert t.calls[-1][2] == 32 * SCRATCH  # Proton's own exit: every CTA (its tree)
    keep = pr._Keep(8, None, True)
    pr._POLICY = keep
    t.start()
    keep.reach = pr._reachable()
    assert keep.reach is None
    assert t.HookManager.active_hooks[0].metadata_path == {}  # as in 3.6: this session's hook saw no load
    t.launch()
    t.finalize()
    pr._POLICY = None
    assert len(keep.launches) == 1, keep.missed
    ln = keep.launches[0]
    assert ln["ctas_total"] == 32 and len(ln["ctas"]) < 32 and ln["kernel"] == "twice"
    assert ln["counts"] == {"scope_1": 32 * UNITS * 3, "scope_2": 32 * UNITS}
    assert t.calls[-1][0] == 0x7F00 and t.calls[-1][2] == len(ln["ctas"]) * SCRATCH  # Proton got the sample
    said = keep.said()
    assert said["applied"] is True and "why" not in said and said["exits"] == 1
    assert "records tallied over 32 CTAs" in pr._sample_said(keep)


def test_a_sample_that_does_not_take_effect_says_why(triton36: tuple, capsys: pytest.CaptureFixture) -> None:
    t, pr = triton36
    proton_own = t.InstrumentationHook.__dict__["exit"]
    pr.install_hook()
    keep = pr._Keep(8, None, True)
    pr._POLICY = keep
    t.start()
    hook = t.HookManager.active_hooks[0]
    hook.exit = proton_own.__get__(hook)  # Proton's own exit bound on the instance: the wrapper never runs
    keep.reach = pr._reachable()
    assert keep.reach is not None and "not profctl's wrapper" in keep.reach
    t.launch()
    t.finalize()
    pr._POLICY = None
    assert keep.launches == [] and t.calls[-1][2] == 32 * SCRATCH
    said = keep.said()
    assert said["applied"] is False and "never called" in said["why"] and "--warps" in said["fallback"]
    line = pr._sample_said(keep)
    assert "NO CTA SAMPLE" in line and "\n" not in line
    assert "NO CTA SAMPLE" in capsys.readouterr().err


def test_a_launch_of_an_unknown_kernel_is_said(triton36: tuple) -> None:
    t, pr = triton36
    pr.install_hook()
    t.loaded = True  # loaded before profctl's hooks were there
    keep = pr._Keep(8, None, True)
    pr._POLICY = keep
    t.start()
    t.launch()
    t.finalize()
    pr._POLICY = None
    assert keep.launches == [] and keep.exits == 1 and "no metadata for the launch's kernel" in keep.said()["why"]
