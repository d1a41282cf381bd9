"""Interleaved A/B: two variants of one attention case timed in alternating rounds in one process, so clock and
thermal drift, and whatever else changes between two processes, fall on both alike.

    python -m profctl.workloads.ab --backend old.py:attn --variant-b new.py:attn --seqlen 4096 --rounds 20 \
        --iters 10 --warmup 5 --device cuda --jsonl run/events.jsonl
    python -m profctl.workloads.ab --backend my.py:attn --env-a MY_TILE=64 --env-b MY_TILE=128 ...

Variants: two backends (``--backend A --variant-b B``), or one backend under two environment settings
(``--env-a``/``--env-b``, comma lists of VAR=VALUE; the variable is set in this process before each of the
variant's iterations, so only settings the function reads at call time can be compared this way). For each case
of the sweep: both variants' inputs are made and their first calls and warm-up done, then R rounds, each timing
``--iters`` iterations of A then of B (B then A in every other round), CUDA events on the GPU and
``perf_counter`` on the CPU. One ``round`` event per round (both variants' iteration times and the wall times
of each block, for the parent's NVML clock samples) and an ``ab`` event per case go to ``--jsonl``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from profctl.errors import SpecError
from profctl.spec import AttentionSpec

from .attention import Case, Timer, build_parser, check_output, device_event, load_backend, sweep_from_args
from .hooks import Hooks
from .ranges import Nvtx
from .results import jsonl_emitter, one_line


def parse_env(text: str | None) -> dict[str, str]:
    """'VAR=x,OTHER=y' -> {'VAR': 'x', 'OTHER': 'y'} ('' -> {}); ValueError naming a bad part."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not name.strip().replace("_", "").isalnum():
            raise ValueError(f"{part!r} is not VAR=VALUE")
        out[name.strip()] = value
    return out


@contextlib.contextmanager
def environment(env: dict[str, str], names: set[str]) -> Iterator[None]:
    """`names` set as `env` says (the others among them removed) while the block runs, then restored."""
    saved = {k: os.environ.get(k) for k in names}
    try:
        for k in names:
            if k in env:
                os.environ[k] = env[k]
            else:
                os.environ.pop(k, None)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Variant:
    """One side of the A/B: its backend's case (inputs, first call, timer) and the environment it runs under."""

    def __init__(self, name: str, spec: AttentionSpec, env: dict[str, str], names: set[str], *, nvtx: bool,
                 seed: int, check: bool, flush_l2: bool = False) -> None:
        self.name, self.env, self.names = name, env, names
        self.row: dict[str, Any] = {"variant": name, "backend": spec.backend, "env": env or None}
        with self.active():
            spec, fn, info = load_backend(spec)
            self.spec = spec
            self.row.update(info)
            self.case = Case(spec, fn, nv=Nvtx(nvtx), hooks=Hooks(), seed=seed)
            o = self.case.first_call()
            if check:
                self.row.update(check_output(spec, o, self.case.q, self.case.k, self.case.v))
            del o
            if self.case.want_bwd and not self.case.differentiable():
                raise RuntimeError(f"{spec.label} has no backward pass (its output does not require grad)")
        self.timer = self.case.timer = Timer(spec.device)
        if flush_l2 and self.case.cuda:  # zeroed before each iteration, as bench --flush-l2 does
            self.case.l2 = self.case.torch.empty(256 * 2**20, dtype=self.case.torch.int8, device="cuda")
        self.stride = 2 if spec.pass_ == "fwd+bwd" else 1
        if spec.pass_ == "bwd":
            with self.active():
                self.case.retained = self.case.forward()

    def active(self) -> contextlib.AbstractContextManager[None]:
        return environment(self.env, self.names)

    def iterations(self, n: int) -> tuple[list[float], float, float]:
        """`n` iterations under this variant's environment: their times (ms) and the block's wall start and end."""
        t0 = time.time()
        with self.active():
            for _ in range(n):
                self.case.one_iter()
            per = self.timer.intervals_ms(self.stride)  # synchronizes
        return [sum(x) for x in per], t0, time.time()

    def release(self) -> None:
        self.case.release()


def run_pair(a: Variant, b: Variant, *, rounds: int, iters: int, warmup: int,
             emit: Callable[[dict[str, Any]], None], index: int) -> list[dict[str, Any]]:
    """Warm-up for both, then `rounds` rounds alternating which goes first; one event per round."""
    for v in (a, b):
        v.iterations(warmup)
    out = []
    for r in range(rounds):
        order = (a, b) if r % 2 == 0 else (b, a)
        got: dict[str, Any] = {"event": "round", "index": index, "round": r,
                               "order": "".join(v.name for v in order)}
        for v in order:
            ms, t0, t1 = v.iterations(iters)
            got[f"{v.name.lower()}_ms"] = ms
            got[f"{v.name.lower()}_wall"] = [t0, t1]
        emit(got)
        out.append(got)
    return out


def run_case(index: int, spec_a: AttentionSpec, spec_b: AttentionSpec, a: argparse.Namespace,
             env_a: dict[str, str], env_b: dict[str, str], emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """One case: both variants set up, the rounds run; the case's ``ab`` event (status ok, or why not)."""
    from .backends import BadReference, classify_failure

    names = set(env_a) | set(env_b)
    ev: dict[str, Any] = {"event": "ab", "index": index, "spec": spec_a.to_dict(), "spec_b": spec_b.to_dict()}
    variants: list[Variant] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                for name, spec, env in (("A", spec_a, env_a), ("B", spec_b, env_b)):
                    variants.append(Variant(name, spec, env, names, nvtx=not a.no_nvtx, seed=a.seed,
                                            check=not a.no_check, flush_l2=a.flush_l2))
            except BadReference as e:
                return {**ev, "status": "error", "reason": f"variant {'AB'[len(variants)]}: cannot load the "
                                                           f"backend: {e}"}
            except Exception as e:
                status, reason = classify_failure(e, list(caught))
                return {**ev, "status": status, "reason": f"variant {'AB'[len(variants)]}: {one_line(reason)}"}
        rounds = run_pair(variants[0], variants[1], rounds=a.rounds, iters=a.iters, warmup=a.warmup, emit=emit,
                          index=index)
        return {**ev, "status": "ok", "reason": None, "variants": [v.row for v in variants], "rounds": len(rounds)}
    except Exception as e:
        status, reason = classify_failure(e, [])
        return {**ev, "status": "error" if status == "unsupported" else status, "reason": one_line(reason)}
    finally:
        for v in variants:
            v.release()


def build_ab_parser() -> argparse.ArgumentParser:
    p = build_parser()
    p.prog = "python -m profctl.workloads.ab"
    p.description = __doc__
    p.add_argument("--variant-b", default=None, help="variant B's backend (A is --backend)")
    p.add_argument("--env-a", default=None, help="variant A's environment: VAR=VALUE,...")
    p.add_argument("--env-b", default=None, help="variant B's environment: VAR=VALUE,...")
    p.add_argument("--rounds", type=int, default=20, help="rounds, each timing --iters iterations of A and of B")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_ab_parser().parse_args(argv)
    try:
        env_a, env_b = parse_env(a.env_a), parse_env(a.env_b)
        specs = sweep_from_args(a).specs()
    except (SpecError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.rounds < 1 or a.iters < 1:
        print("error: --rounds and --iters must be positive", file=sys.stderr)
        return 2
    emit = jsonl_emitter(a.jsonl)

    emit(device_event(a.device))
    ran = 0
    for i, spec in enumerate(specs):
        spec_b = spec if a.variant_b is None else spec.with_(backend=a.variant_b)
        emit({"event": "start", "index": i, "spec": spec.to_dict(), "t": time.time()})
        ev = run_case(i, spec, spec_b, a, env_a, env_b, emit)
        emit(ev)
        print(f"{spec.case_id} {spec.pass_}: {ev['status']}" + (f": {ev['reason']}" if ev.get("reason") else ""),
              flush=True)
        ran += ev["status"] == "ok"
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
