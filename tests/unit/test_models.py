"""profctl.workloads.models on the CPU: preset shapes and parameter counts by hand, FLOPs against a hand count and
torch's own FLOP counter, every mode with eager and SDPA attention, determinism, prefill+decode against a
full forward, GQA, backward ranges on autograd's thread, part timing, and the memory-cap refusal."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from profctl.flops import unmasked_pairs
from profctl.workloads import models as M
from profctl.workloads.models import arithmetic, net, runner

TINY = M.preset("gpt-tiny")
LTINY = M.preset("llama-tiny")
SDPA = F.scaled_dot_product_attention


def block0(model: M.Transformer) -> net._Block:
    return cast(net._Block, model.blocks[0])


def no_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> torch.Tensor:
    """An attn_fn that does no FLOPs (and the wrong thing): returns q."""
    return q


# ------------------------------------------------------------------------------------------------ presets
def test_gpt_presets_are_gpt2_small_medium_large() -> None:
    for name, (layers, d, heads) in {"gpt-sm": (12, 768, 12), "gpt-md": (24, 1024, 16),
                                     "gpt-lg": (36, 1280, 20)}.items():
        c = M.preset(name)
        assert (c.layers, c.d_model, c.heads, c.kv_heads, c.head_dim) == (layers, d, heads, heads, 64)
        assert c.mlp_hidden == 4 * d and c.mlp == "gelu" and c.norm == "layernorm" and c.positions == "learned"
        assert (c.vocab, c.vocab_real, c.max_seqlen) == (50304, 50257, 1024)
        assert c.tied_embeddings and c.bias


def test_llama_7b_preset() -> None:
    c = M.preset("llama-7b")
    assert (c.layers, c.d_model, c.heads, c.kv_heads, c.head_dim, c.mlp_hidden, c.vocab) == \
        (32, 4096, 32, 32, 128, 11008, 32000)
    assert (c.norm, c.norm_eps, c.mlp, c.positions, c.rope_theta) == ("rmsnorm", 1e-5, "swiglu", "rotary", 1e4)
    assert not c.tied_embeddings and not c.bias


def test_overrides() -> None:
    c = M.preset("llama-7b", layers=4, kv_heads=8, max_seqlen=8192)
    assert (c.layers, c.kv_heads, c.max_seqlen, c.d_model) == (4, 8, 8192, 4096)
    assert "layers=4" in c.name
    with pytest.raises(ValueError, match="multiple"):
        M.preset("llama-7b", kv_heads=5)
    with pytest.raises(ValueError, match="unknown model preset"):
        M.preset("gpt-xl")


def test_param_count_gpt2_small_by_hand() -> None:
    d, V, P, L = 768, 50304, 1024, 12
    per_layer = (2 * d  # ln_1
                 + d * 3 * d + 3 * d  # c_attn
                 + d * d + d  # c_proj
                 + 2 * d  # ln_2
                 + d * 4 * d + 4 * d  # c_fc
                 + 4 * d * d + d)  # mlp c_proj
    hand = V * d + P * d + L * per_layer + 2 * d  # wte (tied head), wpe, blocks, ln_f
    assert hand == 124_475_904
    assert M.param_count(M.preset("gpt-sm")) == hand
    # with GPT-2's unpadded vocabulary: the famous 124M
    assert M.param_count(M.preset("gpt-sm").with_(vocab=50257)) == 124_439_808


def test_param_count_llama_7b_by_hand() -> None:
    d, V, L, ffn = 4096, 32000, 32, 11008
    per_layer = 4 * d * d + 3 * d * ffn + 2 * d  # q k v o, gate up down, two RMSNorm weights
    hand = V * d + L * per_layer + d + V * d  # embedding, blocks, final norm, untied head
    assert hand == 6_738_415_616  # Llama-2-7B's published count
    assert M.param_count(M.preset("llama-7b")) == hand
    # GQA shrinks k and v: 8 kv heads of 128
    assert M.param_count(M.preset("llama-7b", kv_heads=8)) == hand - L * 2 * d * (d - 8 * 128)


@pytest.mark.parametrize("name", ["gpt-tiny", "llama-tiny", "gpt-sm", "llama-7b"])
def test_param_count_matches_the_built_model(name: str) -> None:
    cfg = M.preset(name)
    with torch.device("meta"):
        model = M.Transformer(cfg, torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == M.param_count(cfg)
    blk = block0(model)
    assert blk.qkv.weight.shape == ((cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim, cfg.d_model)
    assert blk.fc_in.weight.shape[0] == (2 if cfg.mlp == "swiglu" else 1) * cfg.mlp_hidden


# ------------------------------------------------------------------------------------------------ FLOPs
def test_flops_by_hand_on_tiny() -> None:
    b, s = 2, 32
    T = b * s
    d, ffn, V, L, h, hd = 64, 256, 256, 2, 4, 16
    per_token_fwd = (2 * d * 3 * d  # qkv
                     + 2 * d * d  # attention output projection
                     + 2 * d * ffn + 2 * ffn * d)  # fc, proj
    head = 2 * d * V
    attn_fwd = L * 4 * b * h * (s * (s + 1) // 2) * hd
    f = M.model_flops(TINY, "train", b, s)
    assert f["matmul"] == 3 * T * (L * per_token_fwd + head)
    assert f["attention"] == attn_fwd * 7 // 2
    assert f["total"] == f["matmul"] + f["attention"] and f["tokens"] == T
    f = M.model_flops(TINY, "prefill", b, s)
    assert f["matmul"] == T * L * per_token_fwd + b * head and f["attention"] == attn_fwd
    ctx = 40
    f = M.model_flops(TINY, "decode", b, ctx)
    assert f["matmul"] == b * (L * per_token_fwd + head)
    assert f["attention"] == L * 4 * b * h * (ctx + 1) * hd and f["tokens"] == b


@pytest.mark.parametrize(("sq", "skv"), [(32, 32), (1, 9), (7, 3), (3, 7)])
def test_pairs_agree_with_profctl(sq: int, skv: int) -> None:
    for causal in (False, True):
        assert arithmetic._visible_pairs(sq, skv, causal) == unmasked_pairs(sq, skv, causal, "top-left")


@pytest.mark.parametrize("cfg", [TINY, LTINY, M.preset("llama-tiny", kv_heads=2)], ids=lambda c: c.name)
def test_matmul_flops_match_torch_flop_counter(cfg: M.ModelConfig) -> None:
    """Every mm/addmm the model runs, counted by torch, equals the formula (an attn_fn with no FLOPs)."""
    b, s = 2, 24
    model = M.build_model(cfg, seed=0)
    idx, tgt = M.make_tokens(cfg, b, s)
    attn = no_attention
    with FlopCounterMode(display=False) as fc:
        loss = model(idx, targets=tgt, attn_fn=attn)
        loss.backward()
    assert fc.get_total_flops() == M.model_flops(cfg, "train", b, s)["matmul"]
    model.eval()
    cache = M.KVCache.allocate(cfg, b, s + 1, "cpu", torch.float32)
    with FlopCounterMode(display=False) as fc:
        M.prefill(model, idx, cache, attn_fn=attn)
    assert fc.get_total_flops() == M.model_flops(cfg, "prefill", b, s)["matmul"]


def test_decode_flops_match_eager_attention_counted_by_torch() -> None:
    """Decode with eager attention: torch counts q@k^T and p@v over ctx+1 keys, exactly the formula."""
    b, ctx = 3, 17
    model = M.build_model(TINY).eval()
    cache = M.KVCache.allocate(TINY, b, ctx + 1, "cpu", torch.float32)
    tok, _ = M.make_tokens(TINY, b, 1)
    with FlopCounterMode(display=False) as fc:
        M.decode_step(model, tok, cache, ctx, attn_fn=M.eager_attention)
    assert fc.get_total_flops() == M.model_flops(TINY, "decode", b, ctx)["total"]


def test_mfu() -> None:
    assert M.mfu(989.4e12 * 0.5, 1.0, 989.4) == pytest.approx(0.5)
    assert M.mfu(1e12, 0.5, 4.0) == pytest.approx(0.5)


def test_the_arithmetic_imports_no_torch() -> None:
    """The arithmetic and the presets it reads are pure Python: a process where torch cannot be imported still
    counts a preset's parameters, FLOPs and memory, and gets what the library gets with torch."""
    code = ("import json, sys\nsys.modules['torch'] = None  # `import torch` raises ImportError from here on\n"
            "from profctl.workloads.models import arithmetic, presets\n"
            "cfg = presets.preset('llama-7b', layers=4)\n"
            "print(json.dumps([arithmetic.param_count(cfg), arithmetic.model_flops(cfg, 'train', 2, 4096),\n"
            "                  arithmetic.estimate_bytes(cfg, 2, 4096, 'train', 'bf16', 'eager', detail=True),\n"
            "                  sorted(m for m in sys.modules if m.split('.')[0] == 'torch' and sys.modules[m])]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    params, flops, (est, parts), torch_modules = json.loads(out.stdout)
    cfg = M.preset("llama-7b", layers=4)
    assert torch_modules == []
    assert params == M.param_count(cfg) and flops == M.model_flops(cfg, "train", 2, 4096)
    assert (est, parts) == M.estimate_bytes(cfg, 2, 4096, "train", torch.bfloat16, "eager", detail=True)


# ------------------------------------------------------------------------------------------------ modes
@pytest.mark.parametrize("cfg", [TINY, LTINY], ids=lambda c: c.name)
def test_eager_and_sdpa_give_the_same_model(cfg: M.ModelConfig) -> None:
    model = M.build_model(cfg, seed=1)
    idx, _ = M.make_tokens(cfg, 2, 48, seed=1)
    with torch.no_grad():
        a = model(idx, attn_fn=M.eager_attention)
        b = model(idx, attn_fn=SDPA)
        wrong = model(idx, attn_fn=lambda q, k, v, **kw: SDPA(q, k, v, **{**kw, "is_causal": False}))
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    assert (a - wrong).abs().max() > 1e-3  # the mask matters: attn_fn is really what runs


def test_eager_attention_matches_sdpa_directly() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 13, 16, generator=g)
    k = torch.randn(2, 2, 21, 16, generator=g)
    v = torch.randn(2, 2, 21, 16, generator=g)
    for causal in (False, True):
        a = M.eager_attention(q, k, v, is_causal=causal, scale=0.3, enable_gqa=True)
        b = SDPA(q, k, v, is_causal=causal, scale=0.3, enable_gqa=True)
        assert torch.allclose(a, b, atol=1e-5)
    with pytest.raises(ValueError, match="enable_gqa"):
        M.eager_attention(q, k, v)


@pytest.mark.parametrize("mode", M.MODES)
def test_each_mode_runs_with_eager_and_sdpa(mode: str) -> None:
    rows = {fn.__name__: M.run_model_case(TINY, mode=mode, batch=2, seqlen=32, device="cpu", attn_fn=fn,
                                          warmup=1, iters=3, peak_tflops=1.0)
            for fn in (M.eager_attention, SDPA)}
    for r in rows.values():
        assert r["status"] == "ok", r
        assert len(r["times_ms"]) == 3 and r["min_ms"] <= r["median_ms"] <= r["max_ms"]
        assert r["tokens_per_step"] == (2 if mode == "decode" else 64)
        assert r["tokens_per_s"] == pytest.approx(r["tokens_per_step"] / (r["median_ms"] / 1e3))
        assert r["model_flops"] == M.model_flops(TINY, mode, 2, 32)["total"] and r["mfu"] > 0
        assert r["config"]["d_model"] == 64 and r["dtype"] == "float32"
    if mode == "train":
        a, b = rows["eager_attention"], rows["scaled_dot_product_attention"]
        assert a["loss_first"] == pytest.approx(b["loss_first"], rel=1e-5)
        assert a["loss_last"] == pytest.approx(b["loss_last"], rel=1e-4)
        assert a["samples_per_s"] > 0


def test_train_loss_follows_the_attention_function() -> None:
    ok = M.run_model_case(TINY, mode="train", batch=2, seqlen=32, device="cpu", attn_fn=SDPA, warmup=0, iters=1)
    bad = M.run_model_case(TINY, mode="train", batch=2, seqlen=32, device="cpu", attn_fn=no_attention,
                           warmup=0, iters=1)
    assert ok["status"] == bad["status"] == "ok"
    assert abs(ok["loss_first"] - bad["loss_first"]) > 1e-4
    # the loss is the cross-entropy of random targets over a near-uniform model: about ln(vocab)
    assert ok["loss_first"] == pytest.approx(torch.log(torch.tensor(256.0)).item(), abs=0.2)


def test_train_steps_change_weights_and_free_grads() -> None:
    model = M.build_model(LTINY, seed=0)
    opt = M.make_optimizer(model, lr=1e-3)
    idx, tgt = M.make_tokens(LTINY, 2, 16)
    before = block0(model).qkv.weight.detach().clone()
    losses = [M.train_step(model, opt, idx, tgt).item() for _ in range(3)]
    assert not torch.equal(before, block0(model).qkv.weight)
    assert all(p.grad is None for p in model.parameters())
    assert losses[-1] < losses[0]  # it learns the fixed batch


def test_master_fp32_train_under_autocast() -> None:
    r = M.run_model_case(LTINY, mode="train", batch=2, seqlen=16, dtype="bf16", device="cpu", master_fp32=True,
                         warmup=0, iters=1)
    assert r["status"] == "ok", r
    assert r["master_fp32"] and r["loss_first"] == pytest.approx(5.55, abs=0.2)


# ------------------------------------------------------------------------------------------------ determinism
def test_same_seed_same_weights_and_inputs() -> None:
    a, b, c = (M.build_model(LTINY, seed=s) for s in (3, 3, 4))
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["blocks.0.qkv.weight"], sc["blocks.0.qkv.weight"])
    assert torch.equal(sa["blocks.0.norm1_w"], torch.ones(64))
    assert all(torch.equal(x, y) for x, y in zip(M.make_tokens(LTINY, 2, 8, seed=5), M.make_tokens(LTINY, 2, 8, seed=5),
                                                 strict=True))
    assert not torch.equal(M.make_tokens(LTINY, 2, 8, seed=5)[0], M.make_tokens(LTINY, 2, 8, seed=6)[0])
    r1, r2, r3 = (M.run_model_case(LTINY, mode="train", batch=2, seqlen=16, device="cpu", warmup=1, iters=2, seed=s)
                  for s in (0, 0, 1))
    assert (r1["loss_first"], r1["loss_last"]) == (r2["loss_first"], r2["loss_last"])
    assert r1["loss_first"] != r3["loss_first"]


# ------------------------------------------------------------------------------------------------ KV cache
@pytest.mark.parametrize("cfg", [TINY, LTINY, M.preset("llama-tiny", kv_heads=1)], ids=lambda c: c.name)
@pytest.mark.parametrize("attn", [M.eager_attention, SDPA], ids=["eager", "sdpa"])
def test_prefill_then_decode_equals_full_forward(cfg: M.ModelConfig, attn: Any) -> None:
    model = M.build_model(cfg, seed=2).eval()
    b, n, t = 2, 24, 15
    idx, _ = M.make_tokens(cfg, b, n, seed=2)
    with torch.no_grad():
        full = model(idx, attn_fn=attn)
    cache = M.KVCache.allocate(cfg, b, n, "cpu", torch.float32)
    last = M.prefill(model, idx[:, :t], cache, attn_fn=attn)
    assert torch.allclose(last, full[:, t - 1], atol=1e-5)
    for pos in range(t, n):
        logits = M.decode_step(model, idx[:, pos:pos + 1], cache, pos, attn_fn=attn)
        assert torch.allclose(logits, full[:, pos], atol=1e-5), pos
    # a decode that ignored the cache would be a different model
    fresh = M.KVCache.allocate(cfg, b, n, "cpu", torch.float32)
    assert not torch.allclose(M.decode_step(model, idx[:, t:t + 1], fresh, t, attn_fn=attn), full[:, t], atol=1e-3)


def test_gqa_kv_heads() -> None:
    cfg = M.preset("llama-tiny", kv_heads=2)
    model = M.build_model(cfg)
    assert block0(model).qkv.weight.shape == ((4 + 2 * 2) * 16, 64)
    seen: list[tuple[int, int, bool]] = []

    def spy(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> torch.Tensor:
        seen.append((q.shape[1], k.shape[1], kw["enable_gqa"]))
        return SDPA(q, k, v, **kw)

    idx, _ = M.make_tokens(cfg, 2, 16)
    with torch.no_grad():
        a = model(idx, attn_fn=spy)
        b = model(idx, attn_fn=M.eager_attention)
    assert seen == [(4, 2, True)] * 2
    assert torch.allclose(a, b, atol=1e-5)
    cache = M.KVCache.allocate(cfg, 2, 17, "cpu", torch.float32)
    assert cache.k.shape == (2, 2, 2, 17, 16)


def test_learned_positions_limit_is_unsupported_not_a_crash() -> None:
    r = M.run_model_case(TINY, mode="train", batch=1, seqlen=129, device="cpu", warmup=0, iters=1)
    assert r["status"] == "unsupported" and "max_seqlen" in r["reason"]
    r = M.run_model_case(M.preset("gpt-tiny", max_seqlen=256), mode="prefill", batch=1, seqlen=129, device="cpu",
                         warmup=0, iters=1)
    assert r["status"] == "ok"


# ------------------------------------------------------------------------------------------------ ranges
class Recorder:
    """A ranges object that logs enter/exit with the thread and whether autograd's backward is running."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, bool]] = []

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        bwd = torch._C._current_graph_task_id() != -1
        self.log.append(("enter", name, bwd))
        try:
            yield
        finally:
            self.log.append(("exit", name, bwd))


def test_attention_backward_runs_inside_its_range() -> None:
    rec = Recorder()

    class Core(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(q, k, v)
            return SDPA(q, k, v, is_causal=True)

        @staticmethod
        def backward(ctx: Any, go: torch.Tensor) -> Any:
            rec.log.append(("kernel", "attn-bwd", True))
            with torch.enable_grad():
                q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
                return torch.autograd.grad(SDPA(q, k, v, is_causal=True), (q, k, v), go)

    def attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> torch.Tensor:
        return Core.apply(q, k, v)

    model = M.build_model(LTINY)
    opt = M.make_optimizer(model)
    idx, tgt = M.make_tokens(LTINY, 1, 8)
    M.train_step(model, opt, idx, tgt, attn_fn=attn, ranges=rec)
    log = rec.log
    names = [n for ev, n, _ in log if ev == "enter"]
    assert set(names) <= set(M.RANGE_NAMES)
    assert {"embed", "norm", "attn.qkv", "attn.core", "attn.out", "mlp", "head", "loss", "backward",
            "optimizer"} <= set(names)
    # balanced, properly nested
    stack: list[str] = []
    for ev, n, _ in log:
        if ev == "enter":
            stack.append(n)
        elif ev == "exit":
            assert stack.pop() == n
    assert not stack
    # every backward of the attention kernel sits directly inside an attn.core range opened in backward
    kernel_at = [i for i, e in enumerate(log) if e[0] == "kernel"]
    assert len(kernel_at) == LTINY.layers
    for i in kernel_at:
        assert log[i - 1] == ("enter", "attn.core", True) and log[i + 1] == ("exit", "attn.core", True)
    bwd_parts = {n for ev, n, bwd in log if ev == "enter" and bwd}
    assert {"attn.core", "attn.qkv", "attn.out", "mlp", "norm", "head", "loss", "embed"} <= bwd_parts


def test_backward_ranges_are_pushed_on_autograd_thread_for_cuda_like_threads() -> None:
    """The markers open the range on whatever thread runs the backward: run backward on another thread."""
    rec_threads: list[tuple[str, int]] = []

    class ThreadRec:
        @contextlib.contextmanager
        def range(self, name: str) -> Iterator[None]:
            rec_threads.append((name, threading.get_ident()))
            yield

    model = M.build_model(TINY)
    idx, tgt = M.make_tokens(TINY, 1, 8)
    loss = model(idx, targets=tgt, ranges=ThreadRec())
    main = threading.get_ident()
    t = threading.Thread(target=loss.backward)
    t.start()
    t.join()
    bwd_threads = {tid for n, tid in rec_threads if n == "attn.core" and tid != main}
    assert len(bwd_threads) == 1 and len([1 for n, tid in rec_threads if n == "attn.core"]) == 2 * TINY.layers


def test_no_markers_without_ranges() -> None:
    model = M.build_model(TINY)
    idx, tgt = M.make_tokens(TINY, 1, 8)
    loss = model(idx, targets=tgt)
    names: set[str] = set()
    todo = [loss.grad_fn]
    while todo:
        fnode = todo.pop()
        if fnode is None or type(fnode).__name__ in names:
            continue
        names.add(type(fnode).__name__)
        todo += [n for n, _ in fnode.next_functions]
    assert not any("Mark" in n for n in names)
    loss = model(idx, targets=tgt, ranges=Recorder())
    names = set()
    todo = [loss.grad_fn]
    while todo:
        fnode = todo.pop()
        if fnode is None or type(fnode).__name__ in names:
            continue
        names.add(type(fnode).__name__)
        todo += [n for n, _ in fnode.next_functions]
    assert any("Mark" in n for n in names)


def test_part_timing_and_attention_share() -> None:
    r = M.run_model_case(LTINY, mode="train", batch=2, seqlen=64, device="cpu", warmup=1, iters=2, part_timing=True,
                         attn_fn=M.eager_attention)
    assert r["status"] == "ok", r
    parts = r["parts_ms"]
    for name in ("attn.core", "attn.qkv", "attn.out", "mlp", "norm", "embed", "head", "loss"):
        assert parts[f"{name}.fwd"] > 0 and parts[f"{name}.bwd"] > 0
        assert parts[name] == pytest.approx(parts[f"{name}.fwd"] + parts[f"{name}.bwd"])
    assert parts["backward"] > parts["attn.core.bwd"] and parts["optimizer"] > 0
    assert 0 < r["attn_share"] < r["attn_block_share"] < 1
    assert r["attn_share"] == pytest.approx(parts["attn.core"] / r["part_step_ms"])
    assert r["forward_ms"] > 0 and r["backward_ms"] == parts["backward"]
    assert r["forward_ms"] + r["backward_ms"] + r["optimizer_ms"] == pytest.approx(r["part_step_ms"])
    assert r["part_timing_cost"] == pytest.approx(r["part_step_ms"] / (sum(r["times_ms"]) / 2) - 1)
    # entries per step: forward embed + 6 per layer + final norm + head + loss, the same again in backward,
    # plus backward and optimizer; two events each
    L = LTINY.layers
    assert r["part_events_per_step"] == 2 * (2 * (1 + 6 * L + 3) + 2)
    r = M.run_model_case(LTINY, mode="decode", batch=2, seqlen=64, device="cpu", warmup=1, iters=2, part_timing=True)
    assert r["parts_ms"]["decode.step"] > r["parts_ms"]["attn.core"] > 0
    assert "attn.core.bwd" not in r["parts_ms"]


@pytest.mark.parametrize("mode", ["train", "decode"])
def test_part_timer_stays_out_of_the_measured_steps(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The headline step time is measured without the part timer: its host cost per range (a third or more of a
    host-bound decode step on the H100) would otherwise be in it. Parts are timed in steps of their own before
    measuring."""
    phase = {"now": "build"}
    stamped: list[str] = []
    real = M.PartTimer._stamp

    def stamp(self: M.PartTimer) -> object:
        stamped.append(phase["now"])
        return real(self)

    monkeypatch.setattr(M.PartTimer, "_stamp", stamp)

    class Hooks:
        def warmup_begin(self) -> None:
            phase["now"] = "warmup"

        def measure_begin(self) -> None:
            phase["now"] = "measure"

        def measure_end(self) -> None:
            phase["now"] = "after"

    rec = Recorder()
    r = M.run_model_case(LTINY, mode=mode, batch=1, seqlen=32, device="cpu", warmup=1, iters=3, part_timing=True,
                         ranges=rec, hooks=Hooks())
    assert r["status"] == "ok", r
    assert stamped and set(stamped) == {"warmup"}  # never in the measured steps
    assert len(r["times_ms"]) == 3 and r["part_step_ms"] > 0 and r["parts_ms"]["attn.core"] > 0
    # the given ranges (NVTX for a profiler) still see every step: warm-up, part-timed and measured
    assert sum(1 for e in rec.log if e[:2] == ("enter", "attn.core")) == (1 + 3 + 3) * LTINY.layers * (
        2 if mode == "train" else 1)


def test_tee_ranges() -> None:
    a, b = Recorder(), Recorder()
    with M.TeeRanges(a, b).range("mlp"):
        pass
    assert a.log == b.log == [("enter", "mlp", False), ("exit", "mlp", False)]


# ------------------------------------------------------------------------------------------------ memory
def test_estimate_components() -> None:
    cfg, b, s = TINY, 2, 32
    P = M.param_count(cfg)
    tot, parts = M.estimate_bytes(cfg, b, s, "train", "fp32", "flash", detail=True)
    assert parts["weights"] == 4 * P and parts["grads"] == 4 * P and parts["adamw"] == 8 * P
    act = parts["activations"] + parts["head"]
    assert act > parts["grads"]  # here activations win: the total holds them, not the grads
    assert "scores" not in parts and tot == parts["weights"] + parts["adamw"] + act
    eager = M.estimate_bytes(cfg, b, s, "train", "fp32", "eager")
    assert eager - tot == (cfg.layers + 2) * b * cfg.heads * s * s * 4
    # a point whose gradients outweigh its activations: weights + grads + states
    tot1, parts1 = M.estimate_bytes(cfg, 1, 1, "train", "fp32", detail=True)
    assert parts1["grads"] > parts1["activations"] + parts1["head"] and tot1 == 16 * P
    assert M.estimate_bytes(cfg, b, s, "train", "bf16") * 2 == tot
    _, parts = M.estimate_bytes(cfg, b, s, "decode", "bf16", detail=True)
    assert parts["kv_cache"] == 2 * cfg.layers * b * cfg.kv_heads * (s + 1) * cfg.head_dim * 2
    # masters: fp32 weights, grads and states under a bf16 compute dtype
    _, parts = M.estimate_bytes(cfg, b, s, "train", "bf16", master_fp32=True, detail=True)
    assert parts["weights"] == 4 * P and parts["adamw"] == 8 * P and parts["autocast_copies"] == 2 * P


def test_estimate_grows_quadratically_only_for_eager() -> None:
    cfg = M.preset("llama-7b")
    f = [M.estimate_bytes(cfg, 1, s, "prefill", "bf16", "flash") for s in (4096, 8192)]
    e = [M.estimate_bytes(cfg, 1, s, "prefill", "bf16", "eager") for s in (4096, 8192)]
    assert e[1] - e[0] > 3 * (f[1] - f[0])
    # Llama-2-7B bf16 (13.5 GB of weights) at 8K: flash prefill fits a 24 GB card, eager does not; at 16K the
    # weights and the KV cache alone take 22 GB
    assert M.estimate_bytes(cfg, 1, 8192, "prefill", "bf16", "flash") < 24e9
    assert M.estimate_bytes(cfg, 1, 8192, "prefill", "bf16", "eager") > 24e9
    assert M.estimate_bytes(cfg, 1, 16384, "prefill", "bf16", "flash") > 22e9


def test_memory_cap_refuses_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_build(*a: Any, **k: Any) -> Any:
        raise AssertionError("the model was built despite the estimate")

    monkeypatch.setattr(runner, "build_model", must_not_build)
    t0 = time.perf_counter()
    r = M.run_model_case(M.preset("llama-7b"), mode="train", batch=1, seqlen=4096, dtype="bf16", device="cpu",
                         memory_limit_gib=24, warmup=1, iters=1)
    assert time.perf_counter() - t0 < 1.0
    assert r["status"] == "oom" and "refused before allocating" in r["reason"], r
    assert r["estimate_bytes"] > 24 * 2**30 and "times_ms" not in r
    with pytest.raises(M.OutOfMemoryBudget):
        raise M.OutOfMemoryBudget(2, 1, {"weights": 2})


def test_memory_cap_above_the_estimate_runs() -> None:
    r = M.run_model_case(TINY, mode="train", batch=1, seqlen=16, device="cpu", memory_limit_gib=1.0, warmup=0,
                         iters=1)
    assert r["status"] == "ok" and r["memory_limit_bytes"] == 2**30


def test_bad_arguments_give_error_rows() -> None:
    r = M.run_model_case(TINY, mode="sample", batch=1, seqlen=16, device="cpu")
    assert r["status"] == "error" and "mode" in r["reason"]
    r = M.run_model_case(TINY, mode="train", batch=1, seqlen=16, device="cpu", iters=0)
    assert r["status"] == "error"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_cuda_without_gpu_is_unsupported() -> None:
    r = M.run_model_case(TINY, mode="train", batch=1, seqlen=16, device="cuda")
    assert r["status"] == "unsupported"


# ------------------------------------------------------------------------------------------------ rotary
def test_rope_function_matches_the_textbook_formula_and_its_gradient() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, 8, dtype=torch.float64, generator=g, requires_grad=True)
    ang = torch.rand(5, 1, 4, dtype=torch.float64, generator=g) * 6
    cos, sin = torch.cat((ang.cos(), ang.cos()), -1), torch.cat((ang.sin(), ang.sin()), -1)
    sin_signed = torch.cat((-ang.sin(), ang.sin()), -1)
    x1, x2 = x.chunk(2, -1)
    ref = x * cos + torch.cat((-x2, x1), -1) * sin  # Hugging Face's rotate_half
    out = net._Rope.apply(x, cos, sin_signed)
    assert torch.allclose(out, ref)
    assert torch.autograd.gradcheck(lambda t: net._Rope.apply(t, cos, sin_signed), (x,))
    go = torch.randn_like(ref)
    assert torch.allclose(torch.autograd.grad(out, x, go)[0], torch.autograd.grad(ref, x, go)[0])


def test_rope_implementations_give_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model = M.build_model(LTINY, seed=4)
    idx, tgt = M.make_tokens(LTINY, 2, 16)
    losses = []
    for impl in ("function", "autograd"):
        monkeypatch.setattr(net, "ROPE_IMPL", impl)
        loss = model(idx, targets=tgt)
        loss.backward()
        losses.append((loss.item(), block0(model).qkv.weight.grad.clone()))  # type: ignore[union-attr]
        model.zero_grad()
    assert losses[0][0] == pytest.approx(losses[1][0], rel=1e-6)
    assert torch.allclose(losses[0][1], losses[1][1], atol=1e-7)
