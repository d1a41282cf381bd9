"""Launch configurations of profctl's Triton (and Gluon) attention kernels: :class:`KernelConfig`, the tables of
measured defaults per case, and :func:`parse_configs` (``PROFCTL_TRITON_CONFIG``). Which config a launch takes
(forced, tuned or the default) is decided in triton_attention._pick."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import torch

from .triton_kernels import INTERPRET

E4M3 = getattr(torch, "float8_e4m3fn", None)  # None on a torch without FP8 dtypes (< 2.1)


@dataclass(frozen=True)
class KernelConfig:
    """One kernel's tile shape and launch parameters. For the dK/dV kernel block_n is the key block each
    program owns and block_m the query block it streams; for the others block_m is the owned query block."""

    block_m: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 2
    tma: bool = True  # load the streamed tiles through TMA descriptors where the inputs allow it (_tma_ok)
    pipe: bool = False  # forward (16-bit and FP8): issue the next block's Q @ K^T before this block's softmax
    #: 16-bit forward: rescale the running max (and acc, l) only when a row's max grew by more than 2^8 in a
    #: block (FlashAttention-4's conditional rescaling; the change profctl proton's timeline pointed to)
    lazy: bool = False
    #: 16-bit forward: a persistent grid of this many programs per SM, each looping over the tiles (causal: the
    #: longest first); 0: one program per tile
    persist: int = 0
    #: 16-bit forward: Triton's automatic warp specialization of the unmasked key loop (``tl.range(...,
    #: warp_specialize=True)``)
    ws: bool = False
    #: 16-bit forward on Hopper: the Gluon kernel (workloads/kernels/gluon_attention.py: asynchronous wgmma, the
    #: softmax of one key block under the P·V of the one before; with ``ws``, a producer warp and two consumer
    #: warpgroups of 64 rows taking turns, block_m 128) where it takes the inputs, else the case's first Triton config
    gluon: bool = False
    #: forward (FP8, and 16-bit without pipe or lazy): the unmasked blocks' exps in part (1: every other key) or all
    #: (2) by a polynomial on the FMA pipe instead of the SFU (FlashAttention-4's exp emulation;
    #: kernels.triton_kernels._exp2): explain's fix for sfu-bound
    emu: int = 0
    #: Triton kernels: a register cap per thread (ptxas ``.maxnreg``; 0: none), so that one more block fits an SM
    #: (the FP8 forward at 64x128 tiles, 2 stages: 168 registers let three blocks share an SM instead of two)
    maxnreg: int = 0

    def options(self) -> dict[str, int]:
        """The compile options a Triton launch of this config takes beside its constexprs."""
        return {"num_warps": self.num_warps, "num_stages": self.num_stages,
                **({"maxnreg": self.maxnreg} if self.maxnreg else {})}

    def __str__(self) -> str:
        return (f"m{self.block_m}n{self.block_n}w{self.num_warps}s{self.num_stages}{'' if self.tma else '-ptr'}"
                f"{'-pipe' if self.pipe else ''}{'-lazy' if self.lazy else ''}"
                f"{f'-p{self.persist}' if self.persist else ''}{'-ws' if self.ws else ''}{'-gl' if self.gluon else ''}"
                f"{f'-e{self.emu}' if self.emu else ''}{f'-r{self.maxnreg}' if self.maxnreg else ''}")


def seq_bucket(n: int) -> int:
    """Coarse sequence-length class for choosing configs: <=256, <=1024, <=4096, longer."""
    return 256 if n <= 256 else 1024 if n <= 1024 else 4096 if n <= 4096 else 8192


#: bf16/fp16 launch configs measured on an H100 (triton 3.6, b1 h32 s4096; benchmarks/triton_attention_notes.md):
#: (kernel, head_dim class, causal) -> configs, fastest first. TMA descriptor loads only where they measured
#: faster (the forward and dK/dV at d128: +8 to +20 %); elsewhere pointer loads, which also skip the host-side
#: cost of encoding a TMA descriptor at every launch. Short sequences (<= 256) use 64-row tiles so that a small
#: batch still gives the 132 SMs enough programs.
#: d128 forward on Hopper: the warp-specialized Gluon kernel (a producer warp on TMA, two consumer warpgroups of 64
#: rows taking turns; gluon_attention.forward_ws) first, with the mask or without. On an H200 (issue 50;
#: tests/data/ladder50/time_ws.json, modes_*.json: fresh inputs each round, three processes) it ran 1.00-1.03x cuDNN
#: at b1 h32 s4096, 549-615 against cuDNN's 451-569 TFLOP/s at h16 s8192 causal (15 of 15 rounds). Causal up to 4096
#: tokens the Triton 64x64 kernel came first until the launch path was made cheaper (workloads/kernels/launch.py):
#: the warp-specialized kernel alone was past cuDNN (0.248 ms at b1 h32 s4096) but a call's host time, 0.31-0.39 ms in
#: some processes, passed it, and bench read 230-457 there. With 0.11-0.22 ms of host a step, `profctl bench` causal
#: (2026-11-29, two processes each, TFLOP/s; benchmarks/RESULTS.md "Toward cuDNN"): b1 h32 s4096 552-553 against the
#: Triton kernel's 481 and cuDNN's 531-536 (8 more processes: 551-553), b4 h32 s2048 509-510 against 459 (cuDNN
#: 521-523), b16 h32 s1024 415 against 395 (cuDNN 470). Where it cannot run (another GPU, a shape it does not take)
#: the case's first Triton config runs.
WS_GL = KernelConfig(128, 128, 4, 3, ws=True, gluon=True)
TABLE: dict[tuple[str, int, bool], list[KernelConfig]] = {
    ("fwd", 64, False): [KernelConfig(128, 64, 8, 3, tma=False), KernelConfig(128, 64, 8, 4, tma=False)],
    ("fwd", 64, True): [KernelConfig(64, 64, 4, 3, tma=False), KernelConfig(128, 64, 8, 3, tma=False)],
    ("fwd", 128, False): [WS_GL, KernelConfig(128, 128, 8, 3), KernelConfig(128, 64, 8, 3)],
    ("fwd", 128, True): [WS_GL, KernelConfig(64, 64, 4, 3), KernelConfig(128, 128, 8, 3)],
    ("fwd", 256, False): [KernelConfig(64, 64, 8, 2, tma=False)],
    ("fwd", 256, True): [KernelConfig(64, 64, 8, 2, tma=False)],
    ("dkdv", 64, False): [KernelConfig(64, 64, 4, 3, tma=False), KernelConfig(32, 64, 4, 3, tma=False)],
    ("dkdv", 64, True): [KernelConfig(64, 64, 4, 3, tma=False), KernelConfig(32, 64, 4, 3, tma=False)],
    ("dkdv", 128, False): [KernelConfig(32, 64, 4, 3), KernelConfig(64, 128, 8, 2)],
    ("dkdv", 128, True): [KernelConfig(32, 64, 4, 3), KernelConfig(64, 128, 8, 2)],
    ("dkdv", 256, False): [KernelConfig(16, 64, 8, 2, tma=False)],
    ("dkdv", 256, True): [KernelConfig(16, 64, 8, 2, tma=False)],
    ("dq", 64, False): [KernelConfig(128, 64, 8, 3, tma=False), KernelConfig(64, 64, 4, 3, tma=False)],
    ("dq", 64, True): [KernelConfig(64, 64, 4, 3, tma=False), KernelConfig(128, 64, 8, 3, tma=False)],
    ("dq", 128, False): [KernelConfig(128, 64, 8, 3, tma=False), KernelConfig(128, 64, 8, 4, tma=False)],
    ("dq", 128, True): [KernelConfig(128, 64, 8, 3, tma=False), KernelConfig(128, 64, 8, 4, tma=False)],
    ("dq", 256, False): [KernelConfig(64, 32, 8, 2, tma=False)],
    ("dq", 256, True): [KernelConfig(64, 32, 8, 2, tma=False)],
}
#: Past 4096 tokens, where they measured faster than TABLE's (kernel, head_dim class, causal, bucket): the causal
#: d128 forward at b1 h16 s8192 with 128x128 tiles and 8 warps: 482-492 TFLOP/s against 459-472 for 64x64, four runs on
#: an H200 (issue 50, tests/data/ladder50/time_*.json); equal at s4096, slower at b16 s1024, so only here.
LONG: dict[tuple[str, int, bool, int], list[KernelConfig]] = {
    ("fwd", 128, True, 8192): [WS_GL, KernelConfig(128, 128, 8, 3), KernelConfig(64, 64, 4, 3)],
}
#: FP8 forward configs (head_dim class, causal) -> default first, as measured on an H200 (triton 3.6, b1 h32
#: s4096; benchmarks/fp8_attention.py, RESULTS.md "FP8 attention"): 64x128 with 4 warps came first in all four
#: cases (d128: 814 TFLOP/s non-causal, 1.44x the bf16 forward; d64: 1.29x). The "pipe" variant (the next Q K^T
#: issued before this block's softmax) measured slower or equal. No tile is under 32: FP8 dots are 32 deep.
_PIPE = {"pipe": True}
TABLE_FP8: dict[tuple[int, bool], list[KernelConfig]] = {
    (64, False): [KernelConfig(64, 128, 4, 3), KernelConfig(64, 64, 4, 3), KernelConfig(128, 64, 8, 3)],
    (64, True): [KernelConfig(64, 128, 4, 3), KernelConfig(64, 64, 4, 3), KernelConfig(128, 128, 8, 3)],
    (128, False): [KernelConfig(64, 128, 4, 3), KernelConfig(64, 64, 4, 3), KernelConfig(128, 128, 8, 3, **_PIPE)],
    (128, True): [KernelConfig(64, 128, 4, 3), KernelConfig(64, 64, 4, 3), KernelConfig(128, 128, 8, 3)],
    (256, False): [KernelConfig(64, 64, 8, 2)],  # pointer loads spill at d256 (offline sm_90 compile), TMA does not
    (256, True): [KernelConfig(64, 64, 8, 2)],
}
SHORT_FP8 = KernelConfig(64, 64, 4, 3)
SHORT = {"fwd": KernelConfig(64, 64, 4, 3, tma=False), "dkdv": KernelConfig(32, 64, 4, 3, tma=False),
          "dq": KernelConfig(64, 64, 4, 3, tma=False)}


def candidates(kernel: str, head_dim: int, dtype: torch.dtype, causal: bool, bucket: int) -> list[KernelConfig]:
    """A few launch configs per case; the first is the default, the rest are timed once when tuning is on
    (PROFCTL_TRITON_AUTOTUNE=1). fp32 uses small tiles: its IEEE dots run on the FMA units, not the tensor
    cores, and hold the operands in registers."""
    if INTERPRET:  # unequal, small tiles: several blocks and every mask/tail path at test sizes
        return [KernelConfig(16, 32) if kernel == "dkdv" else KernelConfig(32, 16)]
    if dtype == E4M3:
        dclass = 64 if head_dim <= 64 else 128 if head_dim <= 128 else 256
        return [SHORT_FP8] if bucket <= 256 and dclass <= 128 else TABLE_FP8[(dclass, causal)]
    if dtype == torch.float32:
        if head_dim <= 64:
            return [KernelConfig(16, 32, 4, 2) if kernel == "dkdv" else KernelConfig(32, 32, 4, 2)]
        if head_dim <= 128:
            return [KernelConfig(16, 32, 4, 2) if kernel == "dkdv" else KernelConfig(32, 16, 4, 2)]
        return [KernelConfig(16, 16, 4, 2)]
    dclass = 64 if head_dim <= 64 else 128 if head_dim <= 128 else 256
    if bucket <= 256 and dclass <= 128:
        return [SHORT[kernel]]
    return LONG.get((kernel, dclass, causal, bucket)) or TABLE[(kernel, dclass, causal)]


def autotune_enabled() -> bool:
    return os.environ.get("PROFCTL_TRITON_AUTOTUNE", "0") == "1"


#: ``PROFCTL_TRITON_CONFIG="fwd=m64n64w4s3,dq=m128n64w8s3-ptr"``: force launch configs from the environment (for
#: experiments under a profiler, where the program cannot call :func:`use_configs`)
CONFIG_ENV = "PROFCTL_TRITON_CONFIG"


def check_config(cfg: KernelConfig, fp8: bool) -> None:
    """ValueError for a config whose options its kernel would not take: FMA-pipe exps where there are none
    (:func:`check_emu`), a register cap (``-r``) on a Gluon kernel (its warp-specialized launch sets its own registers;
    only Triton launches take ``maxnreg``), ``-pipe`` or ``-lazy`` on a Gluon kernel without them (of the Gluon
    kernels only the one-warpgroup FP8 forward has ``-pipe``: the next Q·Kᵀ ahead of the softmax)."""
    check_emu(cfg, fp8)
    if cfg.maxnreg and cfg.gluon:
        raise ValueError(f"{cfg}: -r{cfg.maxnreg} (a register cap) is for the Triton kernels, not with -gl")
    if cfg.gluon and (cfg.lazy or (cfg.pipe and (cfg.ws or not fp8))):
        raise ValueError(f"{cfg}: {'-lazy' if cfg.lazy else '-pipe'} is not in this Gluon kernel (with -gl, -pipe is "
                         "the one-warpgroup FP8 forward's only)")


def check_emu(cfg: KernelConfig, fp8: bool) -> None:
    """ValueError where a config asks for FMA-pipe exps (``-e1``/``-e2``) that its kernel does not have: the Gluon
    kernels, and the 16-bit forward's pipelined and lazy loops (rather than running without them unsaid)."""
    if cfg.emu and (cfg.gluon or (not fp8 and (cfg.pipe or cfg.lazy))):
        raise ValueError(f"{cfg}: -e{cfg.emu} (exps on the FMA pipe) is only in the Triton forward's plain key loop"
                         f"{'' if fp8 else ' (not with -pipe or -lazy)'}, not with -gl")


def parse_configs(text: str) -> dict[str, KernelConfig]:
    """``fwd=m128n64w8s3[-ptr],...`` -> {kernel: KernelConfig}; ValueError names the part it cannot read."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"(fwd|dkdv|dq)=m(\d+)n(\d+)w(\d+)s(\d+)(-ptr)?(-pipe)?(-lazy)?(?:-p(\d))?(-ws)?(-gl)?"
                         r"(?:-e([12]))?(?:-r(\d+))?", part)
        if not m:
            raise ValueError(f"{CONFIG_ENV}: {part!r} is not KERNEL=m<BLOCK_M>n<BLOCK_N>w<warps>s<stages>[-ptr]"
                             "[-pipe][-lazy][-p<programs per SM>][-ws][-gl][-e<1|2>][-r<registers>] "
                             "(KERNEL: fwd, dkdv or dq), e.g. fwd=m64n64w4s3")
        out[m[1]] = KernelConfig(int(m[2]), int(m[3]), int(m[4]), int(m[5]), tma=not m[6], pipe=bool(m[7]),
                                 lazy=bool(m[8]), persist=int(m[9] or 0), ws=bool(m[10]),
                                 gluon=bool(m[11]), emu=int(m[12] or 0), maxnreg=int(m[13] or 0))
    return out

