"""Which head dimensions each backend's CUDA kernels take, padded or refused, with where each rule comes from:
profctl warns before a run from them (docs/bench.md lists them). One home for the facts; profctl.spec re-exports
them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class HeadDimRule:
    """Which head dimensions a backend's CUDA kernels take as they are. `largest`: the largest it takes;
    `multiple`: it takes multiples of this (per dtype when it differs); `pads`: True when other head dims are
    zero-padded up to the next multiple (the kernel does the padded work; profctl counts the FLOPs of the real
    head dim), False when they are refused (the case becomes an ``unsupported`` row). `source`: where this is
    decided, so the rule can be checked against a new release."""

    largest: int | None
    multiple: dict[str, int]
    pads: bool
    source: str
    note: str = ""  # said after the largest head dim where it depends on the GPU or library


#: The head-dimension facts, in one place (profctl warns before a run from them; docs/bench.md lists them).
#: CPU paths take any head dim; these are the CUDA kernels'.
HEAD_DIMS: dict[str, HeadDimRule] = {
    "flash-attn": HeadDimRule(256, {"bf16": 8, "fp16": 8}, True,
                              "flash_attn_interface.py pads q/k/v to a multiple of 8; the kernels stop at 256"),
    "fa4": HeadDimRule(256, {"bf16": 8, "fp16": 8}, False,
                       "flash_attn/cute/interface.py asserts head_dim <= 256 and a multiple of 16 bytes"),
    "sdpa-flash": HeadDimRule(256, {"bf16": 8, "fp16": 8, "fp32": 8}, True,
                              "PyTorch sdp_utils.cpp check_head_dim_size_flash (<= 256); attention.cpp "
                              "pad_last_dim<8>"),
    "sdpa-efficient": HeadDimRule(None, {"bf16": 8, "fp16": 8, "fp32": 4}, False,
                                  "PyTorch sdp_utils.cpp check_head_dim_size_mem_efficient (GEMM alignment on "
                                  "sm80+)"),
    "sdpa-cudnn": HeadDimRule(128, {"bf16": 8, "fp16": 8}, False,
                              "PyTorch sdp_utils.cpp check_cudnn_tensor_shapes (<= 128; 256 on sm90/sm100 with "
                              "cuDNN newer than 9.22), a multiple of 8",
                              note=", 256 on H100/B200 with cuDNN newer than 9.22"),
}


def head_dim_warnings(backends: Iterable[str], head_dims: Iterable[int], dtypes: Iterable[str]) -> list[str]:
    """One line per head dim that some backend of the sweep will pad or refuse on CUDA, naming the backends and
    why (from HEAD_DIMS)."""
    out = []
    backends = [b for b in dict.fromkeys(backends) if b in HEAD_DIMS]
    dtypes = list(dict.fromkeys(dtypes))
    for d in sorted(set(head_dims)):
        padded: dict[int, list[str]] = {}
        refused: dict[str, list[str]] = {}
        for b in backends:
            rule = HEAD_DIMS[b]
            if rule.largest is not None and d > rule.largest:
                refused.setdefault(f"the kernels stop at head dim {rule.largest}{rule.note}", []).append(b)
                continue
            mults = {rule.multiple[t] for t in dtypes if t in rule.multiple}
            m = max(mults) if mults else None
            if m is None or d % m == 0:
                continue
            if rule.pads:
                padded.setdefault(-(-d // m) * m, []).append(b)
            else:
                refused.setdefault(f"the kernels take multiples of {m} only", []).append(b)
        parts = [f"{backend_list(bs)} zero-pad{'s' if len(bs) == 1 else ''} it to {to} (the kernels are built for "
                 f"multiples of 8): the time includes the padded work, TFLOP/s count head dim {d}"
                 for to, bs in padded.items()]
        parts += [f"{backend_list(bs)} refuse{'s' if len(bs) == 1 else ''} it ({why}; its rows will say unsupported)"
                  for why, bs in refused.items()]
        if parts:
            out.append(f"--head-dim {d}: " + "; ".join(parts) + " [the rules and their sources: "
                       "docs/bench.md]")
    return out


def backend_list(bs: list[str]) -> str:
    return bs[0] if len(bs) == 1 else ", ".join(bs[:-1]) + " and " + bs[-1]


__all__ = ["HEAD_DIMS", "HeadDimRule", "head_dim_warnings"]
