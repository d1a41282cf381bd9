"""The model workload's options (``profctl bench --model``): its presets and what they allow, one point of a model
sweep (:class:`ModelSpec`) and the sweep (:class:`ModelSweep`), validated like the attention workload's
(profctl.spec) before anything runs. No torch import here."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from profctl.errors import SpecError
from profctl.spec import (
    DEVICES,
    MODEL_DTYPES,
    MODES,
    backend_label,
    check_backend,
    check_choices,
    check_run_options,
    csv,
    parse_backends,
    parse_list,
)


def _model_dtypes(values: list[str]) -> list[str]:
    if "fp8" in values:
        raise SpecError("--dtype fp8 is for the attention workload: the model's layers have no FP8 path "
                        f"(choose from {', '.join(MODEL_DTYPES)} with --model)")
    return check_choices(values, MODEL_DTYPES, "--dtype")


# ------------------------------------------------------------------------------------------------ models
#: model presets (workloads/models/__init__.py has their shapes; docs/models.md the table)
MODEL_PRESETS: tuple[str, ...] = ("gpt-tiny", "gpt-sm", "gpt-md", "gpt-lg", "llama-tiny", "llama-7b")
#: what the options are checked against before a model sweep runs: each preset's (layers, query heads, learned
#: positions or None for rotary); workloads/models/presets.py is the source (tests/unit/test_model_checks.py checks
#: that the two agree)
PRESET_LIMITS: dict[str, tuple[int, int, int | None]] = {
    "gpt-tiny": (2, 4, 128), "gpt-sm": (12, 12, 1024), "gpt-md": (24, 16, 1024), "gpt-lg": (36, 20, 1024),
    "llama-tiny": (2, 4, None), "llama-7b": (32, 32, None),
}


@dataclass(frozen=True)
class ModelSpec:
    """One point of a model sweep: a preset (cut to `layers`, GQA with `kv_heads`), a mode, batch, context
    length, dtype, the attention backend inside it, and a device. `memory_limit_gib` caps the allocator."""

    model: str
    mode: str = "train"
    batch: int = 1
    seqlen: int = 1024
    dtype: str = "bf16"
    backend: str = "sdpa-flash"
    layers: int | None = None
    kv_heads: int | None = None
    device: str = "cuda"
    memory_limit_gib: float | None = None

    def __post_init__(self) -> None:
        if self.model not in MODEL_PRESETS:
            raise SpecError(f"unknown model {self.model!r}; choose from {', '.join(MODEL_PRESETS)}")
        if self.mode not in MODES:
            raise SpecError(f"unknown mode {self.mode!r}; choose from {', '.join(MODES)}")
        check_backend(self.backend)
        for name in ("batch", "seqlen", "layers", "kv_heads"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                raise SpecError(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")
        if self.dtype not in MODEL_DTYPES:
            why = " (fp8 is for the attention workload: the model's layers have no FP8 path)" \
                if self.dtype == "fp8" else ""
            raise SpecError(f"unknown dtype {self.dtype!r} for a model; choose from {', '.join(MODEL_DTYPES)}{why}")
        if self.device not in DEVICES:
            raise SpecError(f"unknown device {self.device!r}; choose from {', '.join(DEVICES)}")
        if self.memory_limit_gib is not None and self.memory_limit_gib <= 0:
            raise SpecError(f"--memory-limit must be positive (GiB), got {self.memory_limit_gib}")
        layers, heads, _ = PRESET_LIMITS[self.model]
        if self.layers is not None and self.layers > layers:
            raise SpecError(f"--layers {self.layers}: {self.model} has {layers} layers; --layers cuts it to fewer")
        if self.kv_heads is not None and (self.kv_heads > heads or heads % self.kv_heads):
            divisors = ", ".join(str(d) for d in range(1, heads + 1) if heads % d == 0)
            raise SpecError(f"--kv-heads {self.kv_heads}: {self.model} has {heads} query heads; --kv-heads must "
                            f"divide them ({divisors})")

    def positions_refusal(self) -> str | None:
        """Why a preset with learned positions cannot take this context, or None (rotary takes any)."""
        limit = PRESET_LIMITS[self.model][2]
        need = self.seqlen + (self.mode == "decode")
        if limit is not None and need > limit:
            return f"{self.model} has {limit} learned positions; --seqlen {self.seqlen} {self.mode} needs {need}"
        return None

    @property
    def label(self) -> str:
        return backend_label(self.backend)

    @property
    def key(self) -> str:
        """``llama-7b,l4,train,b2,s4096,bf16`` (``kv8`` when GQA): the case's name in NVTX ranges and tables."""
        parts = [self.model, f"l{self.layers}" if self.layers else "", self.mode, f"b{self.batch}", f"s{self.seqlen}",
                 self.dtype, f"kv{self.kv_heads}" if self.kv_heads else ""]
        return ",".join(p for p in parts if p)

    shape_key = key

    @property
    def case_id(self) -> str:
        return f"{self.label}[{self.key}]"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class ModelSweep:
    """The model workload options, typed: each a tuple of values the sweep runs over (empty: the default)."""

    models: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    batch: tuple[int, ...] = ()
    seqlen: tuple[int, ...] = ()
    dtype: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    layers: tuple[int, ...] = ()
    kv_heads: tuple[int, ...] = ()
    device: str = "auto"
    warmup: int = 2
    iters: int = 5
    seed: int = 0
    nvtx: bool = True
    part_timing: bool = True
    memory_limit_gib: float | None = None

    def __post_init__(self) -> None:
        check_run_options(self.device, self.warmup, self.iters)

    @classmethod
    def from_strings(cls, *, model: Any = None, mode: Any = None, batch: Any = None, seqlen: Any = None,
                     dtype: Any = None, backend: Any = None, layers: Any = None, kv_heads: Any = None,
                     **scalars: Any) -> ModelSweep:
        return cls(
            models=tuple(check_choices(parse_list(model, option="--model"), MODEL_PRESETS, "--model")),
            modes=tuple(check_choices(parse_list(mode, option="--mode"), MODES, "--mode")),
            batch=tuple(parse_list(batch, int, option="--batch")),
            seqlen=tuple(parse_list(seqlen, int, option="--seqlen")),
            dtype=tuple(_model_dtypes(parse_list(dtype, option="--dtype"))),
            backends=tuple(parse_backends(backend)),
            layers=tuple(parse_list(layers, int, option="--layers")),
            kv_heads=tuple(parse_list(kv_heads, int, option="--kv-heads")),
            **scalars,
        )

    def with_defaults(self, device: str) -> ModelSweep:
        """gpt-tiny on a CPU (seconds), the flash backends and eager on a GPU; train mode; batch 1."""
        gpu = device == "cuda"
        return replace(
            self, device=device, models=self.models or (("gpt-sm",) if gpu else ("gpt-tiny",)),
            modes=self.modes or ("train",), batch=self.batch or (1,), seqlen=self.seqlen or ((1024,) if gpu else (64,)),
            dtype=self.dtype or (("bf16",) if gpu else ("fp32",)),
            backends=self.backends or (("sdpa-flash", "sdpa-cudnn", "eager") if gpu else ("sdpa-flash", "eager")))

    def specs(self) -> list[ModelSpec]:
        """Every (model, layers, kv_heads, mode, batch, seqlen, dtype) with all backends together."""
        s = self.with_defaults(self.device if self.device != "auto" else "cpu")
        out = [ModelSpec(model=m, layers=lay, kv_heads=kv, mode=mode, batch=b, seqlen=sq, dtype=dt, backend=be,
                         device=s.device, memory_limit_gib=s.memory_limit_gib)
               for m, lay, kv, mode, b, sq, dt in itertools.product(
                   s.models, s.layers or (None,), s.kv_heads or (None,), s.modes, s.batch, s.seqlen, s.dtype)
               for be in s.backends]
        if not out:
            raise SpecError("the model options select no case (an empty list?)")
        for m in s.models:  # a model none of whose points can run: refused now (a mixed sweep keeps its rows)
            why = [w for w in (p.positions_refusal() for p in out if p.model == m) if w]
            if len(why) == sum(1 for p in out if p.model == m):
                raise SpecError(f"{why[0]}: no point of {m} can run (use a llama preset for longer contexts)")
        return out

    def with_backends(self, backends: Sequence[str]) -> ModelSweep:
        return replace(self, backends=tuple(backends))

    def to_argv(self) -> list[str]:
        """The options of ``python -m profctl.workloads.model`` for this sweep (defaults filled)."""
        s = self.with_defaults(self.device if self.device != "auto" else "cpu")
        argv = ["--model", csv(s.models), "--mode", csv(s.modes), "--batch", csv(s.batch), "--seqlen",
                csv(s.seqlen), "--dtype", csv(s.dtype), "--backend", csv(s.backends), "--device", s.device,
                "--warmup", str(s.warmup), "--iters", str(s.iters), "--seed", str(s.seed)]
        if s.layers:
            argv += ["--layers", csv(s.layers)]
        if s.kv_heads:
            argv += ["--kv-heads", csv(s.kv_heads)]
        if s.memory_limit_gib is not None:
            argv += ["--memory-limit", str(s.memory_limit_gib)]
        argv += [flag for flag, on in (("--no-nvtx", not s.nvtx), ("--no-part-timing", not s.part_timing)) if on]
        return argv

    def manifest_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}
