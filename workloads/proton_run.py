"""Triton kernels under Proton's instrumentation backend (``profctl proton``): a user's Python program, or one
case of profctl's Triton FlashAttention-2 forward with its steps in Proton scopes.

    python -m profctl.workloads.proton_run --out run/proton --jsonl run/workload.jsonl [mode options] -- SCRIPT.py ARGS
    python -m profctl.workloads.proton_run --out run/case-0 --case '{"backend": "triton", ...}' [--time 5]

Proton writes ``<out>.chrome_trace`` (``--data trace``) or ``<out>.hatchet`` (``--data tree``) when the session is
finalized; what it drops from a full buffer it prints on standard error (the parent keeps the log).

* A program runs in this process as on its own (profctl.workloads.pyprofile.run_program), after Proton's Triton
  semantic is on and its session started, so the scopes its kernels name are recorded; its exit status is this
  process's, and an ``exit`` event.
* A case (``--case``, an AttentionSpec as JSON): the plain forward runs a few times first (the GPU clocks up,
  the plain kernel compiles), then ONE launch of the scoped forward (triton_attention.scoped) is recorded, and
  the SM clock NVML reports right after it is written in a ``recorded`` event (cycles -> time). With
  ``--time N`` the plain and the scoped forward are first each launched N times and their kernel times
  measured by torch.profiler (the GPU's own start and end of each kernel, not the host-side buffer allocation
  and copies Proton adds around a launch), written in an ``overhead`` event, in this same process (one import,
  one compile: a second child cost as much as the recording); the scoped launches run in a Proton session that
  is told not to parse them (they would be held in memory, every record of every CTA of every launch).
* ``--ctas N`` (the default for a case, 16): the records of every CTA are tallied in this process right after
  the launch (exact counts per scope, from the buffer), then Proton's parser and trace writer are handed only
  the regions of about N CTAs (profctl.workloads.proton_ctas.choose: every CTA of a few SMs, and the longest),
  so the trace and Proton's memory stay small; for a case whose records cannot give every scope's cycles (an
  unknown buffer layout, a full buffer, a 32-bit clock), one more launch under Proton's tree format gives each
  scope's total cycles over all CTAs (``<out>.hatchet``). A ``sampled`` event says what was kept. Triton
  3.6 has no option of its own for which CTAs are recorded (its selective sampling picks warps), so this wraps
  its instrumentation hook's exit (triton.profiler.hooks.instrumentation.InstrumentationHook); a Triton whose
  hook differs is refused with one line (``--ctas all`` records everything, as Proton alone does). The kernels'
  metadata are followed at every load here (install_hook), since Proton's hook of a later session never sees a
  kernel loaded in an earlier one. When no launch could be sampled, the run phase's line says ``NO CTA SAMPLE``
  and why, and the ``sampled`` event has ``applied: false``, ``why`` and the fallback (``--warps``: Proton's
  selective sampling of warps, which Triton 3.6 supports on its own).
* ``phase`` events (compile, run, dump, with seconds) as each step ends, so the parent can show progress.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from profctl.spec import AttentionSpec

from . import proton_ctas
from .attention import inputs
from .pyprofile import run_program as run
from .results import jsonl_emitter

#: what the wrapped exit of Proton's instrumentation hook does with a launch's buffer: None (Proton's own),
#: "discard" (nothing parsed: timed launches), or a _Keep (tally every CTA, hand Proton a sample)
_POLICY: Any = None
#: every kernel loaded since install_hook, by its CUfunction handle: its name and its metadata files (JSON, TTGIR).
#: Module-level, not the hook's: Triton 3.6 makes a new InstrumentationHook per proton.start
#: (triton/profiler/profile.py:115) whose ``metadata_path`` starts empty, and a kernel calls the load hooks once,
#: when it is first launched (triton/compiler/compiler.py:470, in CompiledKernel._init_handles), so a kernel
#: compiled in an earlier session is unknown to the hook of a later one.
_LOADED: dict[Any, dict[str, Any]] = {}
_SCOPE_NAMES: dict[Any, tuple[str, dict[int, str]]] = {}


class _Keep:
    """Per launch: tally every CTA's records, keep about `want` CTAs (None: all) for Proton; and, for the lines
    that say so, every launch that could not be sampled and why (``missed``), and the exits seen."""

    def __init__(self, want: int | None, uids: list[int] | None, clock64: bool) -> None:
        self.want, self.uids, self.clock64 = want, uids, clock64
        self.launches: list[dict[str, Any]] = []
        self.missed: list[str] = []
        self.exits = 0
        self.reach: str | None = None  # why the wrapped exit would not run, seen as the session started

    def miss(self, why: str) -> None:
        if why not in self.missed:
            print(f"proton_run: warning: no CTA sample for this launch: {why}; Proton gets every CTA",
                  file=sys.stderr)
        self.missed.append(why)

    def why_none(self) -> str | None:
        """Why no launch was sampled (None: some were)."""
        if self.launches:
            return None
        if self.missed:
            return self.missed[0]
        if not self.exits:
            return ("Proton's instrumentation hook exit (the wrapped InstrumentationHook.exit) was never called "
                    "for a launch of an instrumented kernel" + (f": {self.reach}" if self.reach else ""))
        return "no launch was sampled"

    def said(self) -> dict[str, Any]:
        """The ``sampled`` event's fields that say whether the sample took effect, and why not."""
        why = self.why_none()
        return {"applied": why is None, "exits": self.exits, "missed": len(self.missed),
                **({"why": why, "fallback": FALLBACK} if why else {})}


#: what cuts Proton's records when the CTA sample cannot be applied: its own selective warp sampling
FALLBACK = ("--warps 0,4 (Proton's selective sampling: only those warps recorded, in every CTA) cuts the trace "
            "without profctl's sample")


class NoSampling(RuntimeError):
    """This Triton's Proton cannot be given a sample of CTAs (its instrumentation hook is not 3.6's)."""


def install_hook() -> None:
    """Wrap Proton's instrumentation hook. Triton 3.6's call path at a launch: the launcher (C, in
    triton/backends/nvidia/driver.py:555) calls ``knobs.runtime.launch_exit_hook`` (a HookChain), which holds
    ``HookManager.exit`` (added by HookManager.register, hooks/hook.py:103), which calls ``hook.exit(metadata)`` on
    each active hook instance (hook.py:53): a lookup on the instance, so the class's ``exit`` replaced here is what
    runs. InstrumentationHook.exit (hooks/instrumentation.py:261) hands libproton.exit_instrumented_op the whole
    buffer (``self.buffer``, set by its CudaAllocator as the launcher allocates the profile scratch), and Proton
    parses it then. The kernels' metadata files are recorded here at every load (``knobs.runtime.
    kernel_load_end_hook``, and the hook's init_handle), not taken from the hook instance alone (see _LOADED)."""
    try:
        from triton._C.libproton import proton as libproton
        from triton.profiler.hooks import instrumentation as ih
    except Exception as e:
        raise NoSampling(f"Proton's instrumentation hook cannot be imported ({type(e).__name__}: {e})") from None
    hook = getattr(ih, "InstrumentationHook", None)
    if hook is None or not hasattr(libproton, "exit_instrumented_op") or \
            not (hasattr(hook, "exit") and hasattr(hook, "init_handle")):
        raise NoSampling("this Triton's Proton has no InstrumentationHook.exit / libproton.exit_instrumented_op "
                         "as Triton 3.6 has")
    _add_load_hook()
    if getattr(hook, "_profctl_wrapped", False):
        return
    orig_exit, orig_init = hook.exit, hook.init_handle

    def init_handle(self: Any, module: Any, function: Any, name: str, metadata_group: dict[str, str],
                    hash: str) -> None:
        _on_load(module, function, name, metadata_group, hash)
        orig_init(self, module, function, name, metadata_group, hash)

    def exit(self: Any, metadata: Any) -> None:
        policy = _POLICY
        if policy is None:
            return orig_exit(self, metadata)
        if isinstance(policy, _Keep):
            policy.exits += 1
        if getattr(self, "buffer", None) is None:
            if isinstance(policy, _Keep):
                policy.miss("the hook holds no profile buffer at the launch's exit (the kernel allocated none: "
                            "no Proton scope in it?)")
            return orig_exit(self, metadata)
        data = getattr(metadata, "data", None) or {}
        func, stream = data.get("function"), data.get("stream")
        if policy == "discard":
            libproton.exit_instrumented_op(stream, func, 0, 0)
            return None
        kept = _keep(self, func, policy)
        if kept is None:
            return orig_exit(self, metadata)
        try:
            libproton.exit_instrumented_op(stream, func, kept.data_ptr(), kept.numel())
        finally:
            del kept
        return None

    exit._profctl_wrapper = True  # type: ignore[attr-defined]
    hook.exit, hook.init_handle, hook._profctl_wrapped = exit, init_handle, True


def _add_load_hook() -> None:
    """Record every kernel load from now on, whichever session (or none) is active: Triton 3.6's
    ``knobs.runtime.kernel_load_end_hook`` (a HookChain, called by CompiledKernel._init_handles)."""
    try:
        import triton.knobs as knobs

        chain = knobs.runtime.kernel_load_end_hook
        if _on_load not in getattr(chain, "calls", []):
            chain.add(_on_load)
    except Exception as e:  # an older Triton: the hook's own init_handle (wrapped) still records the loads
        print(f"proton_run: kernel loads not followed through triton.knobs ({type(e).__name__}: {e})",
              file=sys.stderr)


def _on_load(module: Any, function: Any, name: str, metadata_group: dict[str, str], hash: str) -> None:
    """A kernel loaded: its name and metadata files, by its function handle (never raises: Triton is loading)."""
    try:
        if not function:
            return
        group = dict(metadata_group or {})
        _LOADED[function] = {"name": name,
                             "metadata": next((p for k, p in group.items() if k.endswith("json")), None),
                             "ttgir": next((p for k, p in group.items() if k.endswith("ttgir")), None)}
    except Exception as e:
        print(f"proton_run: a kernel load not recorded ({type(e).__name__}: {e})", file=sys.stderr)


def _reachable() -> str | None:
    """Why the wrapped exit would not run at a launch now (None: Triton 3.6's path reaches it): the launcher
    calls knobs.runtime.launch_exit_hook, which must hold HookManager.exit, which calls each active hook's
    ``exit``, which must be the wrapper."""
    try:
        import triton.knobs as knobs
        from triton.profiler.hooks import hook as hk
        from triton.profiler.hooks import instrumentation as ih
    except Exception as e:
        return f"Proton's hooks cannot be imported ({type(e).__name__}: {e})"
    cls = ih.InstrumentationHook
    active = [h for h in getattr(hk.HookManager, "active_hooks", []) if isinstance(h, cls)]
    if not active:
        return ("no InstrumentationHook is active in HookManager.active_hooks (is a Proton session with "
                "backend='instrumentation' started?)")
    chain = getattr(knobs.runtime, "launch_exit_hook", None)
    if hk.HookManager.exit not in getattr(chain, "calls", []):
        return "knobs.runtime.launch_exit_hook does not hold HookManager.exit"
    for h in active:
        if not getattr(h.exit, "_profctl_wrapper", False):
            return f"the active hook's exit is {h.exit!r}, not profctl's wrapper"
    return None


def _scope_names(ttgir: str | None) -> dict[int, str]:
    """Scope id -> name of a compiled kernel, as Proton's own init_handle reads them from its TTGIR."""
    if not ttgir:
        return {}
    try:
        from triton._C.libtriton import ir as triton_ir
        from triton._C.libtriton import nvidia as triton_nvidia
        from triton._C.libtriton import proton as triton_proton

        ctx = triton_ir.context()
        triton_ir.load_dialects(ctx)
        triton_nvidia.load_dialects(ctx)
        triton_proton.load_dialects(ctx)
        mod = triton_ir.parse_mlir_module(ttgir, ctx)
        mod.context = ctx
        return {int(i): str(n) for i, n in triton_proton.get_scope_id_names(mod)}
    except Exception as e:
        print(f"proton_run: scope names unread ({type(e).__name__}: {e})", file=sys.stderr)
        return {}


def _names_of(func: Any) -> tuple[str, dict[int, str]]:
    if func not in _SCOPE_NAMES:
        got = _LOADED.get(func) or {}
        _SCOPE_NAMES[func] = (str(got.get("name") or "?"), _scope_names(got.get("ttgir")))
    return _SCOPE_NAMES[func]


def _metadata_of(hook: Any, func: Any) -> str | None:
    """The metadata JSON of the launch's kernel: the hook's own record (kernels loaded in its session), else
    profctl's (kernels loaded in an earlier session)."""
    paths = getattr(hook, "metadata_path", None) or {}
    return paths.get(func) or (_LOADED.get(func) or {}).get("metadata")


def _keep(hook: Any, func: Any, policy: _Keep) -> Any:
    """Tally the launch's records over all CTAs; the regions of the CTAs kept (None: hand Proton all)."""
    import torch

    path = _metadata_of(hook, func)
    if not path:
        policy.miss(f"no metadata for the launch's kernel (function {func!r}: neither the hook "
                    f"({len(getattr(hook, 'metadata_path', None) or {})} kernels) nor profctl ({len(_LOADED)} "
                    "kernels loaded) saw it load)")
        return None
    with open(path, encoding="utf-8") as f:
        meta = json.load(f)
    scratch, units = int(meta.get("profile_scratch_size") or 0), int(meta.get("num_warps") or 0)
    buf = hook.buffer
    if scratch <= 0 or units <= 0 or buf is None or buf.numel() < scratch:
        policy.miss(f"the kernel's profile buffer cannot be read (scratch {scratch}, warps {units}, buffer "
                    f"{None if buf is None else buf.numel()} bytes)")
        return None
    if buf.is_cuda:
        torch.cuda.synchronize()
    h = proton_ctas.read_headers(buf, scratch, units)
    if not h.rows:
        policy.miss(f"no CTA region in the buffer starts with Proton's preamble ({buf.numel() // scratch} regions "
                    f"of {scratch} bytes)")
        return None
    uids = policy.uids or list(range(units))
    got = proton_ctas.tally(buf, h, uids, clock64=policy.clock64)
    name, names = _names_of(func)
    rec: dict[str, Any] = {"kernel": name, "ctas_total": len(h.rows), "layout": h.layout, "overflowed":
                           got["overflowed"], "records": got["records"],
                           "counts": _named(got["counts"], names), "cycles": _named(got["cycles"], names)}
    if policy.want is None or policy.want >= len(h.rows):
        rec.update(ctas=h.cta, how="every CTA", sms=sorted(set(h.sm)), sm_count=len(set(h.sm)))
        policy.launches.append(rec)
        return None
    pick = proton_ctas.choose(h, policy.want)
    rec.update(ctas=pick.ctas, how=pick.how, sms=pick.sms, sm_count=pick.sm_count, longest=pick.longest)
    policy.launches.append(rec)
    kept = proton_ctas.compact(buf, h, pick.rows)
    if kept.is_cuda:
        torch.cuda.synchronize()
    return kept


def _named(by_id: dict[int, int] | None, names: dict[int, str]) -> dict[str, int] | None:
    if by_id is None:
        return None
    out: dict[str, int] = {}
    for i, v in by_id.items():
        key = names.get(i, f"scope_{i}")
        out[key] = out.get(key, 0) + v
    return out


class _Phases:
    """Each step's seconds, as a ``phase`` event when it ends (the parent shows them while the child runs)."""

    def __init__(self, emit: Any) -> None:
        self.emit, self.t = emit, time.perf_counter()

    def done(self, phase: str, **more: Any) -> None:
        now = time.perf_counter()
        self.emit({"event": "phase", "phase": phase, "seconds": round(now - self.t, 3), **more})
        self.t = now


def mode_of(a: argparse.Namespace) -> Any:
    """Proton's instrumentation mode from the options (triton.profiler.mode.Default)."""
    import triton.profiler as proton

    kw: dict[str, Any] = {"buffer_type": a.buffer, "granularity": a.granularity}
    if a.buffer_size:
        kw["buffer_size"] = a.buffer_size
    if a.warps:
        kw.update(sampling_strategy="selective", sampling_options=a.warps)
    opts = [o for o, on in (("clock32", a.clock == 32), ("time_shift", a.time_shift)) if on]
    if opts:
        kw["optimizations"] = ",".join(opts)
    return proton.mode.Default(**kw)


def versions() -> dict[str, Any]:
    import torch
    import triton

    cuda = torch.cuda.is_available()
    return {"event": "device", "name": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None, "triton": triton.__version__,
            "capability": list(torch.cuda.get_device_capability(0)) if cuda else None}


def sm_clock_mhz() -> dict[str, Any]:
    """The SM clock NVML reports now, and its maximum (None where NVML is not there)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("PROFCTL_NVML_INDEX", "0")))
        return {"clock_mhz": int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                "clock_max_mhz": int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM))}
    except Exception:
        return {"clock_mhz": None, "clock_max_mhz": None}


def case_call(spec_json: str) -> tuple[Any, Any]:
    """The forward of one case as a no-argument call, and the spec. A window goes to the Triton forward as
    ``window=`` (forward only: the inputs need no gradient), so the tiles of a windowed case visit the blocks of
    their window alone, as in profctl bench (window None: the forward as it always was)."""
    from .kernels import triton_attention as ta

    spec = AttentionSpec.from_dict(json.loads(spec_json))
    q, k, v, _ = inputs(spec, False, 0)
    fn = ta.attention_bottom_right if spec.mask_align == "bottom-right" else ta.attention  # a window's too
    return (lambda: fn(q, k, v, is_causal=spec.causal, window=spec.window or None)), spec


def record_case(a: argparse.Namespace, emit: Any) -> int:
    """Warm up with the plain forward; with ``--time N`` time N plain launches and then N scoped ones (in a
    Proton session whose launches are not kept), so the cost of looking is measured in this one process; then
    record one launch of the scoped one: with ``--ctas all`` every CTA's timeline (Proton alone); else one whose
    records are tallied here (every scope's count and cycles over all CTAs) and cut down to a sample before
    Proton parses them, and only where the records could not give the cycles one more launch under Proton's
    tree of every CTA."""
    import torch
    import triton.profiler as proton

    from .kernels import triton_attention as ta

    global _POLICY
    ph = _Phases(emit)
    call, spec = case_call(a.case)
    for _ in range(max(3, a.warmup)):
        call()
    torch.cuda.synchronize()
    ph.done("warm-up", what="the plain kernel compiled and run")
    want = None if a.ctas == "all" else int(a.ctas)
    if want is not None:
        install_hook()
    timed = _Timing(a.time, call) if a.time else None
    if timed is not None:
        timed.plain()
        ph.done("time-plain", what=f"{a.time} plain launches timed (torch.profiler)")
    clock: dict[str, Any] = {}
    with ta.scoped():
        if want is not None or timed is not None:
            _unkept_session(a, call, timed)
            ph.done("compile", what="the scoped kernel compiled under Proton" +
                    ("" if timed is None else f", and {a.time} scoped launches timed"))
            if timed is not None:
                emit(timed.event(spec))
        if want is not None:
            keep = _Keep(want, [int(x) for x in a.warps.split(",") if x.strip()] or None, a.clock == 64)
            _POLICY = keep
        proton.start(a.out, data=a.data, backend="instrumentation", mode=mode_of(a))
        try:
            if want is not None:
                keep.reach = _reachable()
            call()
            torch.cuda.synchronize()
            clock = sm_clock_mhz()
            ph.done("run" if want is None else "run-sample", what="the recorded launch" +
                    ("" if want is None else _sample_said(keep)))
        finally:
            proton.finalize()
            _POLICY = None
        ph.done("dump", what=f"Proton's {a.data} written")
        if want is not None and _needs_tree(keep):
            # the records could not give every scope's cycles (an unknown layout, a full buffer, a 32-bit
            # clock): one more launch under Proton's tree of every CTA gives them
            proton.start(a.out, data="tree", backend="instrumentation", mode=mode_of(a))
            try:
                call()
                torch.cuda.synchronize()
                ph.done("run-tree", what="one more launch, every CTA into Proton's tree (the records could "
                                         "not give every scope's cycles)")
            finally:
                proton.finalize()
            ph.done("dump-tree", what="Proton's tree written")
    if want is not None:
        emit({"event": "sampled", **_summed(keep.launches), "want": want, **keep.said()})
    emit({"event": "recorded", "case": spec.to_dict(), "kernel": "_fwd_kernel", **clock})
    return 0


def _needs_tree(keep: _Keep) -> bool:
    """Whether the sampled launch's own records left some kernel's cycles untold."""
    return not keep.launches or any(ln.get("cycles") is None for ln in keep.launches)


class _Timing:
    """The cost of looking: `n` launches of the plain forward and `n` of the scoped one, their kernel times. A
    failure to time is said in the ``overhead`` event, never fatal to the recording that follows."""

    def __init__(self, n: int, call: Any) -> None:
        self.n, self.call = n, call
        self.times: dict[str, tuple[list[float], str]] = {}
        self.error: str | None = None

    def _time(self, which: str) -> None:
        if self.error is not None:
            return
        try:
            self.times[which] = _kernel_times(self.call, self.n, "_fwd_kernel")
        except Exception as e:  # the recording goes on; the parent says the cost was not measured
            self.error = f"timing the {which} kernel failed: {type(e).__name__}: {e}"

    def plain(self) -> None:
        self._time("plain")

    def scoped(self) -> None:
        self._time("scoped")

    def event(self, spec: AttentionSpec) -> dict[str, Any]:
        if self.error is not None or set(self.times) != {"plain", "scoped"}:
            return {"event": "overhead", "case": spec.to_dict(), "error": self.error or "not timed"}
        (plain, how_plain), (scoped, how_scoped) = self.times["plain"], self.times["scoped"]
        return {"event": "overhead", "case": spec.to_dict(), "plain_us": plain, "scoped_us": scoped,
                "method": how_plain if how_plain == how_scoped else f"{how_plain} (plain), {how_scoped} (scoped)",
                "plain_median_us": statistics.median(plain) if plain else None,
                "scoped_median_us": statistics.median(scoped) if scoped else None, **sm_clock_mhz()}


def _unkept_session(a: argparse.Namespace, call: Any, timed: _Timing | None) -> None:
    """One Proton session whose launches are not kept: the scoped kernel compiles under Proton (its first launch)
    and, with `timed`, is timed. Proton is told not to parse the launches (they would be held in memory, every
    record of every CTA of every launch); a Triton whose hook cannot be wrapped sums them into a tree in a
    temporary directory instead (bounded memory), which is thrown away."""
    import torch
    import triton.profiler as proton

    global _POLICY
    discard = True
    try:
        install_hook()
    except NoSampling:
        discard = False
    with tempfile.TemporaryDirectory() as d:
        _POLICY = "discard" if discard else None
        proton.start(os.path.join(d, "unkept"), data="tree", backend="instrumentation", mode=mode_of(a))
        try:
            call()
            torch.cuda.synchronize()
            if timed is not None:
                timed.scoped()
        finally:
            proton.finalize()
            _POLICY = None


def _sample_said(keep: _Keep) -> str:
    """The run phase's words: the sample as it was applied, or one line saying it was not, and why."""
    why = keep.why_none()
    if why is None:
        n = len(keep.launches)
        kept = keep.launches[-1]
        return (f" (records tallied over {kept['ctas_total']} CTAs, {len(kept['ctas'])} CTAs handed to Proton"
                + (f"; {n} launches" if n > 1 else "") + ")")
    line = f"NO CTA SAMPLE: {why}; Proton got every CTA; {FALLBACK}"
    print(f"proton_run: warning: {line}", file=sys.stderr)
    return f" ({line})"


def _summed(launches: list[dict[str, Any]]) -> dict[str, Any]:
    """The launches' tallies as one: counts (and cycles) per kernel and scope, CTAs per launch."""
    if not launches:
        return {"launches": 0, "kernels": {}}
    kernels: dict[str, dict[str, Any]] = {}
    for ln in launches:
        k = kernels.setdefault(ln["kernel"], {"counts": {}, "cycles": {}, "launches": 0, "ctas_total": 0,
                                               "ctas_kept": 0, "overflowed": False})
        k["launches"] += 1
        k["ctas_total"] += ln["ctas_total"]
        k["ctas_kept"] += len(ln["ctas"])
        k["overflowed"] = bool(k["overflowed"] or ln.get("overflowed"))
        for field in ("counts", "cycles"):
            if ln.get(field) is None or k[field] is None:
                k[field] = None
                continue
            for name, v in ln[field].items():
                k[field][name] = k[field].get(name, 0) + v
    first = launches[0]
    return {"launches": len(launches), "kernels": kernels, "how": first.get("how"), "ctas": first.get("ctas"),
            "sms": first.get("sms"), "sm_count": first.get("sm_count"), "longest": first.get("longest"),
            "layout": first.get("layout")}


def _kernel_times(fn: Any, n: int, name: str) -> tuple[list[float], str]:
    """The GPU times (µs) of the kernels named `name` in `n` calls of `fn`: torch.profiler's CUDA activity (the
    kernel alone), else CUDA events around each call (then also what Proton adds on the stream per launch)."""
    import torch

    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                events = json.load(f).get("traceEvents", [])
        times = [float(e["dur"]) for e in events if e.get("cat") == "kernel" and name in str(e.get("name"))]
        if len(times) >= n:
            return times[-n:], "torch.profiler"
    except Exception as e:  # CUPTI unavailable, or taken by another profiler
        print(f"proton_run: torch.profiler kernel times unavailable ({type(e).__name__}: {e})", file=sys.stderr)
    out = []
    for _ in range(n):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        fn()
        t1.record()
        t1.synchronize()
        out.append(t0.elapsed_time(t1) * 1000.0)
    return out, "cuda-events"


def run_program(a: argparse.Namespace, entry: list[str], emit: Any) -> int:
    """The user's program inside a Proton session; its exit status."""
    import triton.profiler as proton

    global _POLICY
    error: dict[str, Any] = {}
    ph = _Phases(emit)
    keep = None
    if a.ctas != "all":
        install_hook()
        keep = _POLICY = _Keep(int(a.ctas), [int(x) for x in a.warps.split(",") if x.strip()] or None,
                               a.clock == 64)
    proton.start(a.out, data=a.data, backend="instrumentation", mode=mode_of(a))
    if keep is not None:
        keep.reach = _reachable()
    try:
        status = run(entry, error)
    finally:
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception:
            pass
        ph.done("run", what="the program" + ("" if keep is None else _sample_said(keep)))
        proton.finalize()
        _POLICY = None
        ph.done("dump", what=f"Proton's {a.data} written")
    if keep is not None:
        emit({"event": "sampled", **_summed(keep.launches), "want": int(a.ctas), **keep.said()})
    emit({"event": "exit", "status": status, **sm_clock_mhz(), **error})
    return status


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m profctl.workloads.proton_run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="Proton's output, without its suffix")
    p.add_argument("--jsonl", default=None, help="append the events here")
    p.add_argument("--data", choices=("trace", "tree"), default="trace")
    p.add_argument("--buffer", choices=("shared", "global"), default="shared")
    p.add_argument("--buffer-size", type=int, default=0, help="bytes per CTA (0: Proton's default)")
    p.add_argument("--warps", default="", help="record only these warps (comma list of warp ids)")
    p.add_argument("--granularity", default="warp")
    p.add_argument("--clock", type=int, choices=(32, 64), default=64)
    p.add_argument("--time-shift", action="store_true")
    p.add_argument("--case", default=None, help="an AttentionSpec as JSON (profctl's Triton forward)")
    p.add_argument("--time", type=int, default=0, help="with --case: first time N plain and N scoped launches "
                                                        "(the cost of looking), then record")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--ctas", default="all", help="about N CTAs of each launch handed to Proton (the rest tallied "
                                                 "here), or all")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- SCRIPT.py ARGS... or -- -m MODULE ARGS...")
    a = p.parse_args(argv)
    entry = a.program[1:] if a.program[:1] == ["--"] else a.program
    if (a.case is None) == (not entry):
        p.error("give either --case SPEC or the program after --")
    return a, entry


def main(argv: list[str] | None = None) -> int:
    a, entry = parse(argv)
    if entry and entry[0] != "-m" and not Path(entry[0]).is_file():
        print(f"error: {entry[0]}: no such file", file=sys.stderr)
        return 2
    emit = jsonl_emitter(a.jsonl)
    try:
        import triton.profiler as proton  # noqa: F401
        import triton.profiler.language as pl
    except Exception as e:
        emit({"event": "no-proton", "error": f"{type(e).__name__}: {e}"})
        print(f"error: Proton cannot be imported: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    if a.ctas != "all" and not (a.ctas.isdigit() and int(a.ctas) > 0):
        print(f"error: --ctas {a.ctas!r}: a number of CTAs, or all", file=sys.stderr)
        return 2
    emit(versions())
    pl.enable_semantic("triton")
    try:
        if a.case is None:
            return run_program(a, entry, emit)
        return record_case(a, emit)
    except NoSampling as e:
        emit({"event": "no-sampling", "error": str(e)})
        print(f"error: Proton cannot be given a sample of CTAs: {e}; --ctas all records every CTA",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
