"""Cause detectors of the compute units: warp divergence, the matrix path (no tensor cores, legacy mma.sync),
the SFU and FMA pipes at their limit, and the matrix work against another kernel's."""

from __future__ import annotations

import re

from profctl.analysis.cause_catalog import Cause, Evidence
from profctl.analysis.cause_context import (
    HMMA_RATE_ON_HOPPER,
    MATMUL_TEXT,
    MEMORY_WAITS,
    WGMMA_EFFICIENCY,
    Context,
    line_where,
    pct,
    top,
)
from profctl.analysis.figures import matrix_flops
from profctl.analysis.floor import XU_OPS, xu_mix
from profctl.analysis.parked import warp_specialized
from profctl.analysis.thresholds import value


def warp_divergence(ctx: Context) -> Cause | None:
    tpi = ctx.f.get("threads_per_inst")
    div = [ln for ln in ctx.lines if ln.mem.get("warp_inst") and ln.mem.get("thread_inst")
           and ln.mem["thread_inst"] / ln.mem["warp_inst"] < 28]
    if not div and (tpi is None or tpi >= 28):
        return None
    saving = 0.0
    by_inst = 0.0
    all_inst = sum(ln.mem.get("warp_inst", 0.0) for ln in ctx.lines) or 1.0
    for ln in div:
        avg = ln.mem["thread_inst"] / ln.mem["warp_inst"]
        saving += ctx.line_share(ln) * (1 - avg / 32)
        by_inst += ln.mem["warp_inst"] / all_inst * (1 - avg / 32)
    if ctx.util("issue_pct") >= 0.6:  # issue-bound: time goes with warp instructions, and the paths serialize
        saving = max(saving, by_inst * ctx.util("issue_pct"))
    if not div and tpi is not None:
        saving = (1 - tpi / 32) * (1 - ctx.share(*MEMORY_WAITS))
    if saving < 0.05:
        return None
    hot = top(div, lambda ln: ln.samples)
    ev = [f"{tpi:.1f} of 32 threads active per instruction on average" if tpi is not None else "lanes idle"]
    ev += [f"{line_where(ln)}: {ln.mem['thread_inst'] / ln.mem['warp_inst']:.1f} threads per instruction, "
           f"{pct(ctx.line_share(ln))} of the warp samples" for ln in hot[:2]]
    branches = [ln for ln in ctx.lines if ln.mem.get("divergent_targets")]
    if branches:
        ev.append("divergent branches at " + ", ".join(line_where(ln) for ln in top(branches, lambda x: x.mem[
            "divergent_targets"], 2)))
    return ctx.cause("warp-divergence", (ctx.duration_us or 0) * saving, ev, hot + top(branches, lambda x: x.mem[
        "divergent_targets"], 1))


def _peak_ratio(ctx: Context, slow: str, fast: str) -> float | None:
    """ncu's own peak of one tensor path over another's (``sm__ops_path_tensor_op_<path>..peak_sustained``)."""
    def peak(path: str) -> float | None:
        for k, v in ctx.p.metrics.items():
            if k.startswith(f"sm__ops_path_tensor_op_{path}_src_") and "sparsity_off" in k and \
                    k.endswith(".sum.peak_sustained") and v:
                return float(v)
        return None

    a, b = peak(slow), peak(fast)
    return a / b if a and b else None


def mma_paths(ctx: Context) -> list[Cause]:
    """no-tensor-cores and legacy-mma: matrix work on a slower path than the GPU offers."""
    out: list[Cause] = []
    t = ctx.duration_us or 0.0
    tensor = ctx.util("tensor_pct")
    fma = ctx.util("fma_pct")
    ffma = ctx.f.opcode_share("FFMA", "DFMA") or 0.0
    hot = ctx.lines[:5]
    matmul_text = [ln for ln in hot if MATMUL_TEXT.search(ln.text or "")]
    # a library kernel (no lines) by its name, only where it stages operands in shared memory as matrix kernels do
    name_hint = bool(re.search(r"gemm|matmul|mm_|dot|attn|attention|fwd|mma|conv", ctx.p.base_name, re.I)) and \
        bool(ctx.f.opcode_count("LDS", "LDSM") or (ctx.f.get("shared_wavefronts") or 0) > 0)
    if tensor < 0.05 and (fma >= 0.4 or ffma >= 0.3) and (matmul_text or (name_hint and not ctx.has_lines)) and \
            (ctx.cc is None or ctx.cc >= (7, 0)):
        r = _fma_over_tensor(ctx)
        saving = t * max(fma, ffma) * (1 - r)
        ev: list[str] = [Evidence(f"the FMA pipe is {pct(fma)} busy and FFMA is {pct(ffma)} of the instructions while "
                                  f"the tensor pipe is idle ({pct(tensor)})",
                                  "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", round(fma, 4),
                                  "fraction", 0.4, ">="),
                         f"FP32 FMA rate is {r:.2f}x the tensor cores' on this GPU (TF32)"]
        ev += [f"{line_where(ln)}: {ln.text[:80]}" for ln in matmul_text[:1]]
        relieves = {"fma": 0.0, "issue": 0.0}
        if not ctx.has_lines and ctx.cc is not None and ctx.cc >= (9, 0):
            # a library's FFMA GEMM: its TF32 path on this GPU is a wgmma kernel that reads its operands from shared
            # memory itself, so the LDS traffic into registers goes too (cuBLAS SGEMM -> TF32 on the H200: L1 235 us
            # of work from 1597; tests/data/fixes matmul_tf32); a user's own tl.dot keeps its operand loads
            relieves.update(l1=0.0, lsu=0.0)
            ev.append("a library kernel: its TF32 path here is warpgroup MMA, which reads the operand tiles from "
                      "shared memory without the loads into registers this kernel issues")
        out.append(ctx.cause("no-tensor-cores", saving, ev, matmul_text[:2] or hot[:1], relieves=relieves))
    # warp-level MMA only: HMMA in the instruction mix and no wgmma; or, without the mix, on Hopper, a busy tensor
    # pipe that ran no wgmma instruction (its other work there is mma.sync; Blackwell's tcgen05 MMAs are not
    # counted by that metric, so there only the mix tells)
    by_mix = ctx.f.hmma > 0 and ctx.f.gmma == 0
    by_count = not ctx.f.opcodes and ctx.f.wgmma_insts == 0 and ctx.cc is not None and ctx.cc[0] == 9
    if ctx.cc is not None and ctx.cc >= (9, 0) and (by_mix or by_count) and tensor >= 0.1:
        r = _peak_ratio(ctx, "hmma", "hgmma") or HMMA_RATE_ON_HOPPER
        eff, whose = WGMMA_EFFICIENCY, "a typical wgmma attention kernel's"
        if ctx.other is not None and (ctx.other.f.wgmma_insts or 0) > 0 and ctx.other.util("tensor_pct") > 0:
            eff, whose = ctx.other.util("tensor_pct"), "B's"
        new = t * tensor * r / eff
        serial = ""
        xu = ctx.util("xu_pct")
        if ctx.other is None and xu > 0:
            # alone: a wgmma attention kernel overlaps its softmax's exps with its MMAs only in part (cuDNN's forward
            # on the H200 ran at tensor + XU busy = 101-110 %, d64 and d128: tests/data/fixes), so the fixed kernel
            # takes at least the MMAs at wgmma's rate plus the exps, over SERIAL_OVERLAP
            both = (t * tensor * r + t * xu) / SERIAL_OVERLAP
            if both > new:
                new = both
                serial = (f"; its exps (XU {pct(xu)} busy, {t * xu:.1f} us of work) overlap the MMAs only in part in "
                          f"wgmma kernels (cuDNN: tensor + XU busy 101-110 %), so at least {new:.1f} us")
        mma_lines = [ln for ln in ctx.lines if ln.has("HMMA")]
        what = (f"{ctx.f.hmma:.3g} HMMA (mma.sync) instructions and no wgmma" if by_mix else
                "no wgmma instruction (sm__inst_executed_pipe_tensor_op_gmma = 0) while the tensor pipe works: "
                "its matrix work is warp-level mma.sync")
        ev = [Evidence(f"{what} on a compute capability {ctx.cc[0]}.{ctx.cc[1]} GPU; the tensor pipe is {pct(tensor)} "
                       "busy", "smsp__inst_executed (HMMA) / sm__inst_executed_pipe_tensor_op_gmma.sum", ctx.f.hmma,
                       "warp instructions", None, "HMMA > 0 and no wgmma"),
              f"mma.sync's rate is {r:.2f}x wgmma's here; at {whose} {pct(eff)} tensor efficiency the same work "
              f"takes {t * tensor * r / eff:.1f} us{serial}"]
        out.append(ctx.cause("legacy-mma", t - new, ev, top(mma_lines, lambda ln: ln.samples, 2)))
    return out


#: tensor + XU busy of a wgmma attention kernel over the kernel's time (cuDNN's forward on the H200: 1.10 at d128,
#: 1.01 at d64): how much of its exps its MMAs hide
SERIAL_OVERLAP = 1.05


def _fma_over_tensor(ctx: Context) -> float:
    """FP32 FMA FLOP rate over the TF32 tensor rate of the GPU (profctl.devices), or the H100's (67 / 495)."""
    pk = ctx.peak
    fma = getattr(pk, "fp32_tflops", None) if pk is not None else None
    tf32 = pk.tflops.get("fp32") if pk is not None else None
    if fma and tf32:
        return float(min(fma / tf32, 1.0))
    return 67.0 / 494.7


def pipes(ctx: Context) -> list[Cause]:
    """sfu-bound and compute-bound: a pipe at its limit (alone), or more of one pipe's work than B's."""
    out: list[Cause] = []
    t = ctx.duration_us or 0.0
    xu, fma = ctx.util("xu_pct"), ctx.util("fma_pct")
    busiest = ctx.f.limiting_unit()
    mix = xu_mix(ctx.p)
    total_xu = sum(mix.values())
    ex2 = sum(v for k, v in mix.items() if k.startswith("MUFU.EX2"))
    mufu = sum(v for k, v in mix.items() if k.startswith("MUFU"))
    if xu >= 0.6 and busiest and busiest[0].startswith("XU") and total_xu and mufu < 0.5 * total_xu:
        # the XU is full of conversions, rounding or bit ops, not exps: their own finding, and no exp advice (an
        # FMA polynomial for exp2 adds FRND/F2I work on this very pipe)
        conv = total_xu - mufu
        top_ops = sorted(((k, v) for k, v in mix.items() if not k.startswith("MUFU")), key=lambda kv: -kv[1])[:3]
        lines = top([ln for ln in ctx.lines if ln.has(*[k for k in XU_OPS if k != "MUFU"])], lambda ln: ln.samples, 2)
        ev = [f"the XU pipe is the busiest unit at {pct(xu)}, and {pct(conv / total_xu)} of its instructions are not "
              "MUFU: " + ", ".join(f"{k} {pct(v / total_xu)}" for k, v in top_ops)
              + f" (MUFU.EX2 {pct(ex2 / total_xu)})",
              "an exp emulated on the FMA pipe still needs its rounding and exponent conversion here: moving more "
              "exps to a polynomial would not relieve this pipe"]
        left = max((total_xu - conv) / total_xu * xu, ctx.max_unit(exclude=("XU pipe (exp)",)))
        out.append(ctx.cause("xu-conversions", t * max(1 - left / xu, 0.0), ev, lines,
                             relieves={"xu": 1 - conv / total_xu}))
    elif xu >= 0.6 and busiest and busiest[0].startswith("XU"):
        k = 1.0  # FMA-pipe time per emulated exp, in units of one MUFU exp's time (a degree-3..5 polynomial)
        p = max((xu - fma) / (xu * (1 + k)), 0.0)
        balanced = max((1 - p) * xu, fma + p * xu * k, ctx.max_unit(exclude=("XU pipe (exp)",)))
        exp_lines = [ln for ln in ctx.lines if ln.has("MUFU")]
        ev = [f"the XU pipe (MUFU: exp, rcp) is the busiest unit at {pct(xu)}; the FMA pipe is {pct(fma)}",
              f"moving {pct(p)} of the exps to an FMA polynomial would balance the two at about {pct(balanced)}"]
        if ctx.roofs is not None and ctx.roofs.get("sfu") is not None:
            ev.append(f"the shape's SFU roof: {ctx.roofs.get('sfu').seconds * 1e6:.1f} us")
        if total_xu and mufu < total_xu:
            ev.append(f"MUFU is {pct(mufu / total_xu)} of the XU's instructions (MUFU.EX2 {pct(ex2 / total_xu)})")
        out.append(ctx.cause("sfu-bound", t * (1 - balanced / xu), ev, top(exp_lines, lambda ln: ln.samples, 2),
                             relieves={"xu": 1 - p}))
    c = _compute_bound(ctx)
    if c is not None:
        out.append(c)
    return out


#: opcodes that move bytes or lanes between registers without arithmetic: byte permutes, selects, lane shuffles, and
#: the logic ops that unpack bytes (what a layout conversion of an MMA's result into a register operand is made of)
SHUFFLE_OPS = ("PRMT", "SEL", "SHFL", "LOP3")


def register_shuffle(ctx: Context) -> Cause | None:
    """A kernel issuing MMAs whose instructions are for a large share byte and lane moves (register-shuffle): the
    saving is their share above an MMA kernel's usual share, of the time where every warp runs the same dependent
    chain, of the busy issue slots in a warp-specialized kernel."""
    f = ctx.f
    tot = f.opcode_total
    if not tot or not (f.gmma or f.hmma):
        return None
    counts = {op: f.opcode_count(op) for op in SHUFFLE_OPS}
    share = sum(counts.values()) / tot
    if share < value("shuffle_share"):
        return None
    excess = share - value("shuffle_usual")
    issue = ctx.util("issue_pct")
    t = ctx.duration_us or 0.0
    # where every warp runs the same chain (no warp specialization) a latency-bound warp's time goes with its
    # instructions: the shuffles' share of them; in a warp-specialized ping-pong the other warpgroup's MMAs run under
    # one warpgroup's non-MMA work, and the shuffles cost only their issue slots (tests/data/ladder50: the planted
    # _gl_fp8_fwd_kernel and the warp-specialized _gl_ws_fp8_kernel)
    ws = warp_specialized(ctx.p)
    saving = t * excess * (issue if ws else 1.0)
    lines = top([ln for ln in ctx.lines if ln.has("PRMT", "SEL", "SHFL")],
                lambda ln: sum(n for op, n in ln.ops.items() if op.split(".")[0] in SHUFFLE_OPS), 2)
    ev = [Evidence(f"{pct(share)} of the {tot / 1e6:.0f} M warp instructions move bytes or lanes between registers ("
                   + ", ".join(f"{op} {pct(n / tot)}" for op, n in sorted(counts.items(), key=lambda kv: -kv[1])
                               if n) + ") in a kernel that issues MMAs", metric="sass__inst_executed_per_opcode",
                   value=100 * share, unit="%", threshold=100 * value("shuffle_share"), judged=">="),
          (f"their issue slots above the usual {pct(value('shuffle_usual'))}: {pct(excess)} of the "
           f"{pct(issue)}-busy issue slots, {saving:.1f} us (a warp-specialized kernel: the other warpgroup's MMAs "
           "run under the rest)" if ws else
           f"{pct(excess)} of every warp's instructions above the usual {pct(value('shuffle_usual'))}, on the warps' "
           f"own dependent chains (no warp specialization; issue slots {pct(issue)} busy): {saving:.1f} us")]
    if lines:
        ev.append("most of them at " + ", ".join(line_where(ln) for ln in lines))
    return ctx.cause("register-shuffle", saving, ev, lines, relieves={"issue": 1 - excess}, degree=share)


def _compute_bound(ctx: Context) -> Cause | None:
    """compute-bound: alone, a pipe at its roof (what is left to its peak; no work removed). Against B, more work
    for the same result is wasted-work (:func:`wasted_work`), never 'compute-bound' of a pipe not at its roof."""
    t = ctx.duration_us or 0.0
    if ctx.other is not None:
        return None
    pipes_ = {k: v for k, v in ctx.f.units().items() if "pipe" in k and not k.startswith(("XU", "LSU"))}
    name = max(pipes_, key=lambda k: pipes_[k]) if pipes_ else ""
    val = pipes_.get(name, 0.0)
    if val >= 100 * value("roof_busy"):
        left = t * max(1 - val / 95, 0.0)
        ev = [f"the {name} is {val:.0f}% busy: the kernel is at its compute roof; only less work on it helps"]
        roof = _tensor_roof_us(ctx) if name.startswith("tensor") else None
        if roof is not None:
            left = max(t - roof, 0.0)
            ev.append(f"its {ctx.f.tensor_ops / 1e12:.3g} TFLOP of matrix work take {roof:.1f} us at the "
                      f"{ctx.peak.model} dense peak: {pct(roof / t)} of the time")
        elif ctx.roofs is not None:
            ev.append("the shape's roofs: " + ", ".join(f"{r.name} {r.seconds * 1e6:.1f} us" for r in ctx.roofs.roofs))
        return ctx.cause("compute-bound", left, ev, relieves={})  # what is left to the roof: no work removed
    return None


def _tensor_roof_us(ctx: Context) -> float | None:
    """The kernel's own matrix work (ncu's tensor ops) at the GPU's dense peak for its dtype, in us."""
    ops, pk = ctx.f.tensor_ops, ctx.peak
    if not ops or pk is None:
        return None
    dtypes = {"bf16": "bf16", "fp16": "fp16", "tf32": "fp32", "fp8": "fp8", "e4m3": "fp8", "e5m2": "fp8"}
    used = [k for k, v in ctx.p.metrics.items() if k.startswith("sm__ops_path_tensor_op_") and
            k.endswith("_sparsity_off.sum") and v]
    for k, d in dtypes.items():
        if any(f"_src_{k}" in u for u in used) and pk.tflops.get(d):
            return float(ops / (pk.tflops[d] * 1e12) * 1e6)
    return None


#: the units a loop feeds: skipping part of its iterations (masked blocks) takes their work off all of them; DRAM
#: keeps its traffic (a kernel's operands come from DRAM once, their re-reads from L2)
_LOOP_UNITS = ("tensor", "xu", "fma", "alu", "issue", "lsu", "l1", "l2")


def wasted_work(ctx: Context) -> Cause | None:
    """Work the result does not need: tensor FLOPs counted (ncu's tensor operations, else the MMA instructions
    weighed by their shapes) against the shape's useful FLOPs (masks included) alone, or against B's for the same
    result in a pair; in a pair, also more FP32 instructions than B's for the same result."""
    mine, how = matrix_flops(ctx.p)
    limit = value("wasted_work")
    o = ctx.other
    if o is not None:
        theirs, how_b = matrix_flops(o.p)
        if mine and theirs and mine > limit * theirs:
            ev: list[str] = [Evidence(f"A does {mine / 1e12:.3g} TFLOP of matrix work, B {theirs / 1e12:.3g} "
                                      f"({mine / theirs:.2f}x) for the same result ({_how(how)}; B {_how(how_b)})",
                                      "sm__ops_path_tensor_op_*.sum", mine, "FLOP", theirs * limit, "> B x")]
            return _wasted(ctx, theirs / mine, ev, "tensor")
        if (mine and theirs) or ctx.util("tensor_pct") >= value("tensor_idle") or o.f.tensor_ops or \
                o.util("tensor_pct") >= value("tensor_used"):
            return None  # the same matrix work (or B does it on the tensor cores: no-tensor-cores, not this)
        tpa = (ctx.f.get("threads_per_inst") or 32.0) / 32.0
        tpb = (o.f.get("threads_per_inst") or 32.0) / 32.0
        fa = ctx.f.opcode_count("FFMA", "FMUL", "FADD") * tpa
        fb = o.f.opcode_count("FFMA", "FMUL", "FADD") * tpb
        if fa and fb and fa > limit * fb and ctx.util("fma_pct") >= value("fma_busy"):
            ev = [f"A issues {fa:.3g} FP32 thread instructions, B {fb:.3g} ({fa / fb:.2f}x) for the same result; the "
                  f"FMA pipe is {pct(ctx.util('fma_pct'))} busy in A"]
            return _wasted(ctx, fb / fa, ev, "fma", share=ctx.util("fma_pct") * (1 - fb / fa))
        return None
    need = ctx.roofs.get("tensor") if ctx.roofs is not None else None
    useful = need.work if need is not None else None
    if not mine or not useful or mine <= limit * useful:
        return None
    ev = [Evidence(f"{mine / 1e12:.3g} TFLOP of matrix work counted ({_how(how)}) where the shape's result needs "
                   f"{useful / 1e12:.3g} ({mine / useful:.2f}x): the kernel computes blocks its mask hides, "
                   "recomputes, or pads", "sm__ops_path_tensor_op_*.sum", mine, "FLOP", useful * limit, "> useful x")]
    return _wasted(ctx, useful / mine, ev, "tensor")


def _how(how: str) -> str:
    return "ncu's tensor operations" if how == "counted" else "its MMA instructions weighed by their shapes"


def _wasted(ctx: Context, left: float, ev: list[str], unit: str, share: float | None = None) -> Cause:
    """The cause, relieving every unit the loop feeds (or the one `unit`) to `left` of its work."""
    units = _LOOP_UNITS if unit == "tensor" else (unit, "issue")
    lines = [ln for ln in ctx.lines if ln.has("HMMA", "HGMMA", "QGMMA")] if unit == "tensor" else []
    return ctx.cause("wasted-work", (ctx.duration_us or 0.0) * (share if share is not None else 1 - left), ev,
                     top(lines, lambda ln: ln.samples, 2), relieves={k: left for k in units},
                     share=share if share is not None else 1 - left, degree=1 - left)
