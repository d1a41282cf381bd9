"""The model workload: GPT- and Llama-shaped training steps, prefill and decode (workloads/models/__init__.py) with a
swappable attention backend, as the child process profctl launches.

    python -m profctl.workloads.model --model llama-7b --layers 4 --mode train --batch 2 --seqlen 4096 \
        --backend sdpa-cudnn,sdpa-flash,eager --dtype bf16 --device cuda --jsonl events.jsonl

Same protocol as workloads/attention.py: every option a comma list, one case at a time, JSON-lines events
(device, start, row), cudaProfilerStart/Stop around the measured iterations, NVTX ranges in profctl's domain:

    <backend>[<model key>] / warmup | measure / embed, norm, attn.qkv, attn.core, attn.out, mlp, head, loss,
                                                backward, optimizer

(decode.step, the whole decode iteration, is part-timed but not an NVTX level: STEP_RANGES).

``attn.core`` is the attention call itself: the part a faster flash kernel changes. Backward parts are pushed on
autograd's worker thread under the same case and phase ranges, so `profctl ncu --range attn.core` finds the
attention kernels of both passes.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from profctl import memory
from profctl import nvtx as ns
from profctl.errors import SpecError
from profctl.model_spec import ModelSpec, ModelSweep
from profctl.spec import AttentionSpec

from . import models
from .attention import device_event, gpu_budget
from .hooks import Hooks
from .ranges import Nvtx
from .results import jsonl_emitter
from .serve import EXIT_FAST_HELP, finish, release_memory
from .torch_profile import make_hooks

T_MAIN = time.time()  # when this module started running (the warm child's ready event)

#: ranges the model code opens around a whole step: timed by the part timer, but not NVTX levels, so every part
#: sits at ``<case>/<phase>/<part>`` in every mode -- the one shape an ncu --nvtx-include regex can select (ncu
#: splits its expression at '/', so an optional level cannot be written)
STEP_RANGES = frozenset({"decode.step"})


class CaseRanges:
    """The model's part ranges in profctl's NVTX scheme, and the phase hooks run_model_case calls.

    On the thread that runs the case a part is pushed under the case and phase ranges already open; on another
    thread (autograd's, for backward parts) the case and phase are pushed first, so every part sits under
    ``<case>/<phase>/`` whichever thread launched its kernels."""

    def __init__(self, nv: Nvtx, spec: ModelSpec, hooks: Hooks, cuda: bool) -> None:
        self.nv, self.spec, self.hooks, self.cuda = nv, spec, hooks, cuda
        self.main = threading.get_ident()
        self.stack: list[str] = []  # what is open on the main thread: case, phase

    def open(self, name: str) -> None:
        self.nv.push(name)
        self.stack.append(name)

    def close_all(self) -> None:
        while self.stack:
            self.stack.pop()
            self.nv.pop()

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        if name in STEP_RANGES:  # the whole step: the measured iteration already says it (and see STEP_RANGES)
            yield
            return
        prefix = [] if threading.get_ident() == self.main else list(self.stack)
        for p in prefix:
            self.nv.push(p)
        self.nv.push(name)
        try:
            yield
        finally:
            for _ in range(len(prefix) + 1):
                self.nv.pop()

    # ---- the phases (profctl.workloads.models.run_model_case calls these)
    def warmup_begin(self) -> None:
        self.open(ns.WARMUP)

    def measure_begin(self) -> None:
        import torch

        if self.stack and self.stack[-1] == ns.WARMUP:
            self.stack.pop()
            self.nv.pop()
        self.open(ns.MEASURE)
        if self.cuda:
            torch.cuda.cudart().cudaProfilerStart()
        self.hooks.measure_begin(self.spec)

    def iteration_end(self) -> None:
        self.hooks.iteration_end(self.spec)

    def measure_end(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.cudart().cudaProfilerStop()
        self.hooks.measure_end(self.spec)


def run_case(spec: ModelSpec, *, warmup: int, iters: int, seed: int, nvtx: bool, part_timing: bool,
             hooks: Hooks, refusal: str | None = None) -> dict[str, Any]:
    """One point: the backend loaded and checked, the model built, warm-up and measured steps; its row.
    `refusal`: why the point cannot fit in the memory there is (point_memory): an oom row once the backend is
    known to run here, before the model is built."""
    import torch

    from . import backends, models

    cfg = models.preset(spec.model, layers=spec.layers, kv_heads=spec.kv_heads)
    try:
        fn = backends.load(spec.backend)
        check = AttentionSpec(backend=spec.backend, batch=spec.batch, seqlen_q=spec.seqlen, seqlen_kv=spec.seqlen,
                              heads=cfg.heads, kv_heads=cfg.kv_heads or cfg.heads, head_dim=cfg.head_dim,
                              dtype=spec.dtype, causal=True, device=spec.device)
        backends.check(check, fn)
    except (backends.BadReference, backends.BackendUnavailable) as e:
        return {"status": "unsupported" if isinstance(e, backends.BackendUnavailable) else "error",
                "reason": str(e)}
    if refusal:
        return {"status": "oom", "reason": refusal}
    from .backends import TORCH_DTYPES

    ranges = CaseRanges(Nvtx(nvtx, mirror=hooks.ranges()), spec, hooks, spec.device == "cuda")
    ranges.open(spec.case_id)
    try:
        row = models.run_model_case(
            cfg, mode=spec.mode, batch=spec.batch, seqlen=spec.seqlen, dtype=TORCH_DTYPES[spec.dtype],
            device=spec.device, attn_fn=fn, warmup=warmup, iters=iters, seed=seed,
            ranges=ranges if (nvtx or hooks.ranges() is not None) else None, part_timing=part_timing,
            memory_limit_gib=spec.memory_limit_gib, attention_memory="eager" if spec.backend in (
                "eager", "sdpa-math") else None, hooks=ranges)
    finally:
        ranges.close_all()
        if spec.device == "cuda":
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
            torch.cuda.empty_cache()
    row.pop("config", None)
    row["params"] = row.get("params") or models.param_count(cfg)
    return row


def point_memory(spec: ModelSpec) -> dict[str, Any]:
    """What a point needs (models.estimate_bytes) and what it may use (the host's or the GPU's free memory, and
    --memory-limit); `refusal` says why it cannot run when the machine cannot hold it (a point over
    --memory-limit is refused by run_model_case itself, which also caps the allocator)."""

    cfg = models.preset(spec.model, layers=spec.layers, kv_heads=spec.kv_heads)
    kind = "eager" if spec.backend in ("eager", "sdpa-math") else "flash"
    est, parts = models.estimate_bytes(cfg, spec.batch, spec.seqlen, spec.mode, spec.dtype, kind, detail=True)
    have = memory.host_budget(spec.memory_limit_gib) if spec.device != "cuda" else gpu_budget(spec.memory_limit_gib)
    out: dict[str, Any] = {"estimate_bytes": est, "estimate_detail": parts, "refusal": None}
    if have is not None:
        out.update(available_bytes=have.bytes, available_what=have.what)
        if have.what != "of --memory-limit":
            out["refusal"] = memory.refusal(parts, have, est)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m profctl.workloads.model", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="comma list of presets")
    p.add_argument("--mode", default="train", help="comma list of train, prefill, decode")
    p.add_argument("--batch", default="1")
    p.add_argument("--seqlen", default="1024", help="context length(s)")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--backend", "--backends", dest="backend", default="sdpa-flash")
    p.add_argument("--layers", default=None, help="cut the preset to this many layers")
    p.add_argument("--kv-heads", default=None, help="GQA/MQA: key/value heads")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--memory-limit", type=float, default=None, help="GiB: refuse/cap larger points (oom rows)")
    p.add_argument("--no-nvtx", action="store_true")
    p.add_argument("--no-part-timing", action="store_true", help="no per-part CUDA events (attention share)")
    p.add_argument("--jsonl", default=None)
    p.add_argument("--skip", type=int, default=0)
    p.add_argument("--only", default=None)
    p.add_argument("--serve", action="store_true", help="run batches of case indices given on stdin (serve.py)")
    p.add_argument("--requests", default=None, help="with --serve: read the batches from this file, not stdin")
    p.add_argument("--exit-fast", action="store_true", help=EXIT_FAST_HELP)
    p.add_argument("--torch-trace", default=None)
    p.add_argument("--torch-shapes", action="store_true")
    p.add_argument("--torch-memory", action="store_true")
    p.add_argument("--torch-stacks", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        specs = ModelSweep.from_strings(
            model=a.model, mode=a.mode, batch=a.batch, seqlen=a.seqlen, dtype=a.dtype, backend=a.backend,
            layers=a.layers, kv_heads=a.kv_heads, device=a.device, warmup=a.warmup, iters=a.iters, seed=a.seed,
            memory_limit_gib=a.memory_limit).specs()
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    hooks = make_hooks(a.torch_trace, device=a.device, shapes=a.torch_shapes, memory=a.torch_memory,
                       stacks=a.torch_stacks)
    try:
        if a.serve:
            from .serve import exit_now, get_ready, requests_of, serve

            ready = get_ready(a.device, T_MAIN)
            with requests_of(a.requests) as lines:
                rc = serve(lambda cases, emit: _run_cases(a, specs, emit, hooks, set(cases)),
                             lambda: device_event(a.device), lines, default=str, ready=ready)
            hooks.close()
            exit_now(rc)  # the end of its input: no interpreter shutdown to wait for
        emit = jsonl_emitter(a.jsonl, default=str)
        emit(device_event(a.device))
        only = {int(x) for x in a.only.split(",") if x.strip()} if a.only else None
        return finish(_run_cases(a, specs, emit, hooks, only, skip=a.skip), hooks, fast=a.exit_fast)
    finally:
        hooks.close()


def _run_cases(a: argparse.Namespace, specs: list[Any], emit: Callable[[dict[str, Any]], None], hooks: Any,
               only: set[int] | None, skip: int = 0) -> int:
    """Run the cases (all from `skip`, or `only` these); 0 when one ran, 1 when none did."""
    ran = 0
    for i, spec in enumerate(specs):
        if i < skip or (only is not None and i not in only):
            continue
        budget = point_memory(spec)
        refusal = budget.pop("refusal")
        emit({"event": "start", "index": i, "spec": spec.to_dict(), "t": time.time(), "memory": budget})
        row = run_case(spec, warmup=a.warmup, iters=a.iters, seed=a.seed, nvtx=not a.no_nvtx,
                       part_timing=not a.no_part_timing, hooks=hooks, refusal=refusal)
        if row.get("status") == "oom" and refusal:
            row.update(budget)
        emit({"event": "row", "index": i, "spec": spec.to_dict(), "t": time.time(), **row})
        ok = row["status"] == "ok"
        print(f"{spec.case_id}: " + (f"median {row['median_ms']:.3f} ms, {row['tokens_per_s']:.1f} tokens/s"
                                     if ok else f"{row['status']}: {row['reason']}"), flush=True)
        if not ok:
            release_memory()
        ran += ok
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
