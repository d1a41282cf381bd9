"""FlexAttention (``torch.nn.attention.flex_attention``) as two backends, ``flex`` and ``flex-fa4``: one compiled
function (``torch.compile(flex_attention, dynamic=False)``) that compiles once per shape and mask, with the mask as a
block mask (``create_block_mask``) made once per shape and mask and kept; ``flex-fa4`` asks for Flex's
FlashAttention-4 kernels (``kernel_options={"BACKEND": "FLASH"}``).

What users trip on is measured apart from the kernel time and never inside the median (:func:`row_fields` gives it
to the row): building the block mask (``block_mask_ms``), the compile of the forward and of the backward (the first
call's time less a warm call's, ``compile_fwd_ms`` / ``compile_bwd_ms``), the graphs Dynamo compiled for the point
(``compiles``) and any compiled after its set-up, during the timed iterations (``recompiles_timed``: 0 unless a
guard failed). The block mask says which 128 x 128 tiles the kernel computes: ``blocks_computed`` of
``blocks_total`` and the pairs in them (``computed_pairs``, per batch and head), against the pairs the mask leaves
visible (profctl.flops), so the waste of partial tiles is seen. Masks are top-left, like SDPA's causal mask.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from profctl.flops import tile_pairs, visible_pairs
from profctl.spec import AttentionSpec

#: one compiled flex_attention per backend, shared by every shape (as a user would write it): a new shape or mask
#: is a recompile, counted
_COMPILED: dict[str, Any] = {}
#: block masks, built once per (shape, mask, device): (mask, build ms)
_BLOCK_MASKS: dict[tuple[Any, ...], tuple[Any, float | None]] = {}
#: what was measured apart, per case (backend, shape, mask, dtype, device)
_STATS: dict[tuple[Any, ...], dict[str, Any]] = {}
#: each backend's case of its last call: the point whose row asks next
_LAST: dict[str, tuple[Any, ...]] = {}


def _graphs() -> int | None:
    """Graphs Dynamo has compiled in this process (None where this torch keeps no such counter)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:
        return None


def _raise_recompile_limit() -> None:
    """A sweep compiles one graph per shape and mask: past Dynamo's recompile limit (8) it would fall back to eager
    flex_attention silently, a different kernel timed. Raised so the sweep's points all run compiled."""
    import torch._dynamo.config as dc

    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(dc, name):
            setattr(dc, name, max(int(getattr(dc, name)), 4096))
            break
    for name in ("accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(dc, name):
            setattr(dc, name, max(int(getattr(dc, name)), 16384))
            break


def _compiled(name: str) -> Any:
    fn = _COMPILED.get(name)
    if fn is None:
        from torch.nn.attention.flex_attention import flex_attention

        _raise_recompile_limit()
        fn = _COMPILED[name] = torch.compile(flex_attention, dynamic=False)
    return fn


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def mask_mod_of(causal: bool, window: int | None, doc_lengths: tuple[int, ...] | None,
                device: torch.device) -> Callable[..., Any] | None:
    """The mask_mod of a mask (None: no mask at all). Each part is a named function, so the generated code and
    the profiles name it: ``causal_mask``, ``sliding_window``, ``document_mask``."""
    from torch.nn.attention.flex_attention import and_masks

    mods: list[Callable[..., Any]] = []
    if causal:
        def causal_mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return q_idx >= kv_idx

        mods.append(causal_mask)
    if window:
        w = int(window)
        if causal:
            def sliding_window(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
                return q_idx - kv_idx < w
        else:
            def sliding_window(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
                return (q_idx - kv_idx < w) & (kv_idx - q_idx < w)

        mods.append(sliding_window)
    if doc_lengths:
        doc = torch.repeat_interleave(torch.arange(len(doc_lengths), device=device),
                                      torch.tensor(doc_lengths, device=device))

        def document_mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return doc[q_idx] == doc[kv_idx]

        mods.append(document_mask)
    if not mods:
        return None
    return mods[0] if len(mods) == 1 else and_masks(*mods)


def _block_mask(seqlen_q: int, seqlen_kv: int, causal: bool, window: int | None,
                doc_lengths: tuple[int, ...] | None, device: torch.device) -> tuple[Any, float | None]:
    key = (seqlen_q, seqlen_kv, causal, window, doc_lengths, str(device))
    got = _BLOCK_MASKS.get(key)
    if got is None:
        mod = mask_mod_of(causal, window, doc_lengths, device)
        if mod is None:
            got = (None, None)
        else:
            from torch.nn.attention.flex_attention import create_block_mask

            _sync(device)
            t0 = time.perf_counter()
            bm = create_block_mask(mod, None, None, seqlen_q, seqlen_kv, device=str(device))
            _sync(device)
            got = (bm, (time.perf_counter() - t0) * 1e3)
        _BLOCK_MASKS[key] = got
    return got


def _case_key(name: str, q: torch.Tensor, k: torch.Tensor, causal: bool, window: int | None,
              doc_lengths: tuple[int, ...] | None) -> tuple[Any, ...]:
    return (name, tuple(q.shape), tuple(k.shape), str(q.dtype), str(q.device), causal, window, doc_lengths)


def _timed(fn: Callable[[], Any], device: torch.device) -> tuple[Any, float]:
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return out, (time.perf_counter() - t0) * 1e3


def _call(name: str, kernel_options: dict[str, Any] | None, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
          is_causal: bool, scale: float | None, enable_gqa: bool, window: int | None,
          doc_lengths: tuple[int, ...] | None) -> torch.Tensor:
    bm, mask_ms = _block_mask(q.shape[-2], k.shape[-2], is_causal, window, doc_lengths, q.device)
    compiled = _compiled(name)
    kw: dict[str, Any] = {"block_mask": bm, "scale": scale, "enable_gqa": enable_gqa or q.shape[1] != k.shape[1]}
    if kernel_options:
        kw["kernel_options"] = dict(kernel_options)

    def run() -> torch.Tensor:
        return compiled(q, k, v, **kw)

    key = _LAST[name] = _case_key(name, q, k, is_causal, window, doc_lengths)
    st = _STATS.setdefault(key, {"block_mask_ms": mask_ms, "block_mask": bm})
    grad = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    phase = "fwd_grad" if grad else "fwd"
    if phase in st:
        return run()
    g0 = _graphs()
    o1, first = _timed(run, q.device)
    o2, warm = _timed(run, q.device)
    st[f"compile_{phase}_ms"] = max(first - warm, 0.0)
    if grad:  # the backward compiles at its first call: timed here, in the set-up, not in the first iteration
        inputs = [x for x in (q, k, v) if x.requires_grad]
        go = torch.ones_like(o1)
        _, first_b = _timed(lambda: torch.autograd.grad(o1, inputs, go), q.device)
        _, warm_b = _timed(lambda: torch.autograd.grad(o2, inputs, go), q.device)
        st["compile_bwd_ms"] = max(first_b - warm_b, 0.0)
    g1 = _graphs()
    st["compiles"] = (st.get("compiles") or 0) + (g1 - g0) if g0 is not None and g1 is not None else None
    st["graphs_after_setup"] = g1
    st[phase] = True
    return run() if grad else o2


def row_fields(spec: AttentionSpec) -> dict[str, Any]:
    """What the point measured apart from its kernel time (the module's docstring), for its row."""
    key = _LAST.get("flex-fa4" if spec.backend == "flex-fa4" else "flex")
    st = _STATS.get(key) if key is not None else None
    if st is None:
        return {}
    out: dict[str, Any] = {"block_mask_ms": st.get("block_mask_ms")}
    for f in ("compile_fwd_ms", "compile_fwd_grad_ms", "compile_bwd_ms"):
        if st.get(f) is not None:
            out[f] = st[f]
    fwd = st.get("compile_fwd_grad_ms") if spec.pass_ != "fwd" else st.get("compile_fwd_ms")
    out["compile_ms"] = (fwd or 0.0) + (st.get("compile_bwd_ms") or 0.0 if spec.pass_ != "fwd" else 0.0)
    out["compiles"] = st.get("compiles")
    now, after = _graphs(), st.get("graphs_after_setup")
    out["recompiles_timed"] = (now - after) if now is not None and after is not None else None
    out.update(block_fields(spec, st.get("block_mask")))
    return out


def block_fields(spec: AttentionSpec, bm: Any) -> dict[str, Any]:
    """The tiles the block mask computes and their pairs (per batch and head), against the visible pairs."""
    bq, bk = (128, 128)
    size = getattr(bm, "BLOCK_SIZE", None)
    if size:
        bq, bk = int(size[0]), int(size[1])
    used, total, pairs = tile_pairs(spec.seqlen_q, spec.seqlen_kv, spec.causal, spec.mask_align, spec.window,
                                    spec.docs, bq, bk)
    out: dict[str, Any] = {"block_size": [bq, bk], "blocks_computed": used, "blocks_total": total,
                           "computed_pairs": pairs,
                           "visible_pairs": visible_pairs(spec.seqlen_q, spec.seqlen_kv, spec.causal, spec.mask_align,
                                                          spec.window, spec.docs)}
    if bm is not None:
        try:  # the block mask's own count: its partial and full blocks of the first (batch, head)
            n = int(bm.kv_num_blocks[0, 0].sum().item())
            full = getattr(bm, "full_kv_num_blocks", None)
            n += int(full[0, 0].sum().item()) if full is not None else 0
            out["blocks_computed_by_mask"] = n
        except Exception:
            pass
    out["mask_density"] = used / total if total else None
    return out


def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None, dropout_p: float = 0.0,
         is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False, window: int | None = None,
         doc_lengths: tuple[int, ...] | None = None) -> torch.Tensor:
    """FlexAttention, compiled, with its block mask (causal, window, documents)."""
    if attn_mask is not None or dropout_p:
        raise NotImplementedError("flex takes its masks as --causal, --window and --docs (no attn_mask, no dropout)")
    return _call("flex", None, q, k, v, is_causal, scale, enable_gqa, window, doc_lengths)


def flex_fa4(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None, dropout_p: float = 0.0,
             is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
             window: int | None = None, doc_lengths: tuple[int, ...] | None = None) -> torch.Tensor:
    """FlexAttention on its FlashAttention-4 backend (``kernel_options={"BACKEND": "FLASH"}``)."""
    if attn_mask is not None or dropout_p:
        raise NotImplementedError("flex-fa4 takes its masks as --causal, --window and --docs (no attn_mask)")
    return _call("flex-fa4", {"BACKEND": "FLASH"}, q, k, v, is_causal, scale, enable_gqa, window, doc_lengths)


def _flex_supports(spec: AttentionSpec) -> str | None:
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: F401
    except Exception as e:
        return f"needs torch.nn.attention.flex_attention (torch >= 2.5; this is {torch.__version__}): {e}"
    if spec.device == "cpu" and spec.pass_ != "fwd":
        return (f"has no backward on the CPU in torch {torch.__version__} (FlexAttention does not support backward "
                "on CPU): run --pass fwd, or a GPU")
    return None


def _flex_fa4_supports(spec: AttentionSpec) -> str | None:
    why = _flex_supports(spec)
    if why:
        return why
    if spec.device != "cuda":
        return f"runs on CUDA only, not on {spec.device}"
    import inspect

    from torch.nn.attention import flex_attention as fa

    if "BACKEND" not in inspect.getsource(fa):
        return f"needs a torch whose flex_attention takes kernel_options BACKEND (torch {torch.__version__} does not)"
    try:
        import flash_attn.cute  # noqa: F401
    except Exception as e:
        return f"needs FlashAttention-4 (flash_attn.cute) for BACKEND=FLASH: {type(e).__name__}: {e}"
    if spec.dtype not in ("bf16", "fp16"):
        return f"supports bf16 and fp16 only, not {spec.dtype}"
    major, _ = torch.cuda.get_device_capability()
    if major < 9:
        return f"needs compute capability >= 9.0 (Hopper/Blackwell), this GPU is sm_{major}x"
    return None


for _fn, _supports in ((flex, _flex_supports), (flex_fa4, _flex_fa4_supports)):
    _fn.supports = _supports  # type: ignore[attr-defined]
    _fn.causal_align = "top-left"  # type: ignore[attr-defined]
    _fn.masks = ("window", "docs")  # type: ignore[attr-defined]
    _fn.row_fields = row_fields  # type: ignore[attr-defined]
