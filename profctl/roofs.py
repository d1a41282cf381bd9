"""The speed-of-light roofs of an attention kernel, from its shape alone: how fast it could possibly run.

An attention pass has three kinds of unavoidable work, each with a hardware rate:

* **tensor**: the useful matmul FLOPs (:mod:`profctl.flops`: the pairs the mask leaves visible -- causal with the
  backend's alignment, a sliding window's band, the documents' blocks) at the dtype's dense tensor-core peak;
* **sfu**: one exponential per visible (query, key) score in the forward, one more in the backward (P is
  recomputed), at the special-function unit's rate (MUFU: 16 per clock per SM from sm_80 to sm_120, 32 for EX2 on
  Blackwell Ultra sm_103, :data:`profctl.devices.ARCHS`; SMs x boost clock; FlashAttention-3's point that exp, not
  the matmul, limits attention at small head dims);
* **dram**: the minimum bytes: Q, K, V read once and O written once (the backward also reads O, dO and the
  log-sum-exp and writes dQ, dK, dV), at the DRAM bandwidth.

Two more roofs take their work from a profile rather than the shape: :func:`smem_roof` (shared-memory bytes at
SMs x 128 B/clk x boost clock) and :func:`fp32_roof` (FLOPs on the FMA pipe, for a matmul done without tensor cores).

Of the shape's three, the binding roof is the slowest; a kernel's time against it says how much headroom is left
("62 % of the tensor roof; 0.18 ms left"). Peaks and their sources live in :mod:`profctl.devices`; where a
measured figure exists (a large matmul, a device copy on the project's GPU), it is given beside the datasheet one.
Pure arithmetic: no torch import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from profctl import devices
from profctl.flops import PASS_FACTOR, visible_pairs
from profctl.schema.bench import BenchRow
from profctl.shapes import Shape
from profctl.spec import causal_align

#: bytes per element of each dtype profctl runs
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
#: exponentials per visible score, per pass (forward: P = exp(S - m); backward recomputes P once)
EXPS_PER_PAIR = {"fwd": 1.0, "bwd": 1.0, "fwd+bwd": 2.0}


@dataclass(frozen=True)
class AttentionWork:
    """What one attention pass must do, whatever the kernel: FLOPs, exponentials and DRAM bytes."""

    flops: float
    exps: float
    dram_bytes: float
    dtype: str

    @classmethod
    def of(cls, *, batch: int, heads: int, kv_heads: int, seqlen_q: int, seqlen_kv: int, head_dim: int,
           dtype: str = "bf16", causal: bool = False, causal_align: str | None = None,
           pass_: str = "fwd", window: int | None = None, docs: tuple[int, ...] = ()) -> AttentionWork:
        """The work of one pass of this shape (`causal_align` as the backend aligns its mask; a sliding `window` and
        `docs` as profctl.flops counts them: exps too count visible pairs only)."""
        if pass_ not in PASS_FACTOR:
            raise ValueError(f"unknown pass {pass_!r}; choose from {', '.join(PASS_FACTOR)}")
        pairs = visible_pairs(seqlen_q, seqlen_kv, causal, causal_align or "top-left", window, tuple(docs))
        flops = 4.0 * batch * heads * pairs * head_dim * PASS_FACTOR[pass_]
        exps = float(batch * heads * pairs) * EXPS_PER_PAIR[pass_]
        e = DTYPE_BYTES.get(dtype, 2)
        q = batch * heads * seqlen_q * head_dim * e          # Q, O, dO, dQ: one each
        kv = batch * kv_heads * seqlen_kv * head_dim * e     # K, V, dK, dV: one each
        lse = batch * heads * seqlen_q * 4                   # fp32 log-sum-exp per query row
        fwd = q + 2 * kv + q                                 # read Q, K, V; write O
        bwd = (q + 2 * kv + q + q + lse) + (q + 2 * kv)      # read Q, K, V, O, dO, LSE; write dQ, dK, dV
        byts = {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + lse + bwd}[pass_]
        return cls(flops=flops, exps=exps, dram_bytes=float(byts), dtype=dtype)

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> AttentionWork | None:
        """The work of a bench row (or its JSON object; None when a case field is missing)."""
        r = BenchRow.of(row)
        b, h, sq, d = r.batch, r.heads, r.seqlen_q, r.head_dim
        if b is None or h is None or sq is None or d is None:
            return None
        try:
            return cls.of(batch=int(b), heads=int(h), kv_heads=int(r.kv_heads or h), seqlen_q=int(sq),
                          seqlen_kv=int(r.seqlen_kv or sq), head_dim=int(d), dtype=str(r.dtype or "bf16"),
                          causal=bool(r.causal), pass_=str(r.pass_ or "fwd"), window=r.window or None,
                          causal_align=r.causal_align or (causal_align(str(r.backend or "")) if r.window else None),
                          docs=tuple(int(n) for n in r.docs or ()))
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Roof:
    """One roof: the least time the pass needs under one hardware rate, and how that was computed."""

    name: str          # tensor | sfu | dram (attention_roofs); smem | fp32 (smem_roof, fp32_roof)
    seconds: float
    rate: float        # the rate used, in the unit below
    unit: str          # "TFLOP/s" | "Texp/s" | "TB/s"
    work: float        # the work it divides: FLOPs, exponentials or bytes
    source: str

    @property
    def what(self) -> str:
        amount = {"tensor": f"{self.work / 1e12:.3g} TFLOP", "sfu": f"{self.work / 1e9:.3g} G exp",
                  "dram": f"{self.work / 1e6:.3g} MB", "smem": f"{self.work / 1e6:.3g} MB",
                  "fp32": f"{self.work / 1e12:.3g} TFLOP"}[self.name]
        return f"{amount} at {self.rate:.4g} {self.unit}"


@dataclass(frozen=True)
class Headroom:
    """A measured time against the binding roof."""

    roof: Roof
    measured_s: float

    @property
    def pct(self) -> float:
        """The roof's time as a percent of the measured time (100 = at the speed of light)."""
        return 100.0 * self.roof.seconds / self.measured_s if self.measured_s > 0 else float("nan")

    @property
    def left_s(self) -> float:
        return max(self.measured_s - self.roof.seconds, 0.0)

    @property
    def above_roof(self) -> bool:
        """Faster than the roof allows: the FLOP count, the shape or the timing is wrong (never a triumph)."""
        return self.measured_s < self.roof.seconds * 0.98

    def sentence(self) -> str:
        """``62 % of the tensor roof; 0.18 ms left`` (or a warning when the time beats the roof)."""
        if self.above_roof:
            return (f"faster than the {self.roof.name} roof ({_ms(self.roof.seconds)} for {self.roof.what}): "
                    "the shape, FLOP count or timing is wrong")
        return f"{self.pct:.0f} % of the {self.roof.name} roof; {_ms(self.left_s)} left"


@dataclass(frozen=True)
class Roofs:
    """Every roof of one pass on one GPU; `binding` is the one that limits it."""

    device: str
    roofs: tuple[Roof, ...]

    @property
    def binding(self) -> Roof:
        return max(self.roofs, key=lambda r: r.seconds)

    def get(self, name: str) -> Roof | None:
        return next((r for r in self.roofs if r.name == name), None)

    def against(self, measured_s: float) -> Headroom:
        return Headroom(self.binding, measured_s)

    def to_dict(self, measured_s: float | None = None) -> dict[str, Any]:
        """Plain data for JSON and tables: each roof's time in ms, the binding one, and the headroom."""
        out: dict[str, Any] = {"device": self.device, "binding": self.binding.name,
                               "roofs": {r.name: {"ms": r.seconds * 1e3, "rate": r.rate, "unit": r.unit,
                                                  "what": r.what, "source": r.source} for r in self.roofs}}
        if measured_s is not None and measured_s > 0:
            h = self.against(measured_s)
            out.update(pct_of_roof=h.pct, left_ms=h.left_s * 1e3, above_roof=h.above_roof, says=h.sentence())
        return out


def attention_roofs(work: AttentionWork, device_name: str | None) -> Roofs | None:
    """The roofs of `work` on the named GPU (None: a CPU, an unknown GPU, or a dtype it has no tensor peak for)."""
    peak = devices.lookup(device_name)
    if peak is None:
        return None
    tensor = peak.tflops.get(work.dtype)
    if tensor is None:
        return None
    roofs = [Roof("tensor", work.flops / (tensor * 1e12), tensor, "TFLOP/s", work.flops,
                  f"{peak.model} dense {work.dtype} tensor peak: {peak.source}")]
    if peak.sfu_tops:
        roofs.append(Roof("sfu", work.exps / (peak.sfu_tops * 1e12), peak.sfu_tops, "Texp/s", work.exps,
                          f"{peak.model}: {peak.sms} SMs x {peak.sfu_per_clk_sm}/clk x {peak.boost_mhz:.0f} MHz "
                          f"({peak.sfu_source})"))
    roofs.append(Roof("dram", work.dram_bytes / (peak.dram_tbps * 1e12), peak.dram_tbps, "TB/s", work.dram_bytes,
                      f"{peak.model} DRAM bandwidth: {peak.source}"))
    return Roofs(peak.model, tuple(roofs))


def shape_work(shape: str | None, backend: str | None = None, pass_: str | None = "fwd") -> AttentionWork | None:
    """The work of one pass of a shape key (``b1,sq4096,skv4096,h32,kv32,d128,bf16[,causal]``), with `backend`'s
    causal alignment; None for a key that does not parse or a pass without a roof. The one place a shape becomes
    work, for every view that puts a kernel against its roofs."""
    sh = Shape.try_parse(shape) if shape else None
    if sh is None or (pass_ or "fwd") not in PASS_FACTOR:
        return None
    return AttentionWork.of(batch=sh.batch, heads=sh.heads, kv_heads=sh.kv_heads, seqlen_q=sh.seqlen_q,
                            seqlen_kv=sh.seqlen_kv, head_dim=sh.head_dim, dtype=sh.dtype, causal=sh.causal,
                            causal_align=causal_align(backend or "") if (sh.causal or sh.window) else None,
                            pass_=pass_ or "fwd", window=sh.window, docs=sh.docs)


def shape_roofs(shape: str | None, device_name: str | None, backend: str | None = None,
                pass_: str | None = "fwd") -> Roofs | None:
    """The roofs of one pass of a shape key on a GPU (:func:`shape_work`, :func:`attention_roofs`)."""
    work = shape_work(shape, backend, pass_)
    return attention_roofs(work, device_name) if work is not None else None


def smem_roof(smem_bytes: float, device_name: str | None) -> Roof | None:
    """The least time to move `smem_bytes` through shared memory (loads and stores, as ncu counts them) on the named
    GPU: SMs x bytes per clock per SM x boost clock (:attr:`profctl.devices.DevicePeak.smem_tbps`). The roof of a
    kernel bound by shared memory (FlashAttention-4's backward on B200); None when the GPU's SMs or clock are
    unknown. Shape alone does not fix an attention kernel's shared-memory traffic (its tiling does), so this roof
    takes the bytes from the profile."""
    peak = devices.lookup(device_name)
    rate = peak.smem_tbps if peak else None
    if peak is None or rate is None:
        return None
    return Roof("smem", smem_bytes / (rate * 1e12), rate, "TB/s", smem_bytes,
                f"{peak.model}: {peak.sms} SMs x {peak.smem_bytes_per_clk_sm} B/clk x {peak.boost_mhz:.0f} MHz "
                f"({peak.smem_source})")


def fp32_roof(flops: float, device_name: str | None) -> Roof | None:
    """The least time for `flops` on the FP32 (FMA) pipe of the named GPU, the roof of a matmul done without tensor
    cores (an fp32 ``tl.dot`` without TF32, a hand-written FMA loop); None when the GPU has no such figure."""
    peak = devices.lookup(device_name)
    rate = peak.fp32_tflops if peak else None
    if peak is None or rate is None:
        return None
    return Roof("fp32", flops / (rate * 1e12), rate, "TFLOP/s", flops,
                f"{peak.model} FP32 non-tensor peak: {peak.sources.get('fp32_tflops', peak.source)}")


def row_roofs(row: Mapping[str, Any], device_name: str | None = None) -> Roofs | None:
    """The roofs of a bench row on `device_name`, else on the GPU the row names (``gpu_name``)."""
    work = AttentionWork.of_row(row)
    if work is None:
        return None
    return attention_roofs(work, device_name or BenchRow.of(row).gpu_name)


def _ms(s: float) -> str:
    ms = s * 1e3
    return f"{ms:.3g} ms" if ms >= 0.01 else f"{ms * 1e3:.3g} us"
