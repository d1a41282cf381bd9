"""Masks beyond causal (issue 41): a sliding window (--window) and documents packed into one sequence (--docs).
The FLOP counts (profctl.flops) against brute-force counts of the visible pairs for many small shapes, the tiles a
block-sparse kernel computes against brute force, the shape key, the refusals (one line, never a full mask run in
the mask's place), and `profctl bench -b flex,eager` on the CPU."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl import flops
from profctl.cli import app
from profctl.errors import SpecError
from profctl.roofs import AttentionWork, shape_work
from profctl.shapes import Shape, doc_lengths
from profctl.spec import AttentionSpec, AttentionSweep, is_mask_refusal, mask_refusal


def visible(i: int, j: int, sq: int, skv: int, causal: bool, align: str, window: int | None,
            docs: tuple[int, ...]) -> bool:
    """One pair, by the definition: the diagonal of row i, the causal bound, the window, the same document."""
    d = i + (skv - sq if align == "bottom-right" else 0)
    if causal and j > d:
        return False
    if window and (j <= d - window or (not causal and j >= d + window)):
        return False
    if docs:
        bounds = list(itertools.accumulate(doc_lengths(docs, sq)))
        if next(n for n, b in enumerate(bounds) if i < b) != next(n for n, b in enumerate(bounds) if j < b):
            return False
    return True


def brute(sq: int, skv: int, causal: bool, align: str, window: int | None, docs: tuple[int, ...]) -> int:
    return sum(visible(i, j, sq, skv, causal, align, window, docs) for i in range(sq) for j in range(skv))


SEQS = [(1, 1), (5, 5), (7, 3), (3, 7), (16, 16), (17, 9), (9, 17), (33, 33)]
WINDOWS = [None, 1, 2, 4, 8, 40]


@pytest.mark.parametrize(("sq", "skv"), SEQS)
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_window_pairs_match_brute_force(sq: int, skv: int, window: int | None, causal: bool, align: str) -> None:
    assert flops.visible_pairs(sq, skv, causal, align, window) == brute(sq, skv, causal, align, window, ())


@pytest.mark.parametrize("seqlen", [4, 9, 16, 31])
@pytest.mark.parametrize("docs", [(1,), (2,), (3,), (4,)])
@pytest.mark.parametrize("window", [None, 1, 3, 6])
@pytest.mark.parametrize("causal", [False, True])
def test_document_pairs_match_brute_force(seqlen: int, docs: tuple[int, ...], window: int | None,
                                          causal: bool) -> None:
    want = brute(seqlen, seqlen, causal, "top-left", window, docs)
    assert flops.visible_pairs(seqlen, seqlen, causal, "top-left", window, docs) == want
    # the alignments agree where queries and keys are one sequence
    assert flops.visible_pairs(seqlen, seqlen, causal, "bottom-right", window, docs) == want


@pytest.mark.parametrize("lengths", [(1, 3), (5, 2, 9), (8, 8), (1, 1, 1, 1)])
@pytest.mark.parametrize("window", [None, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_document_lengths_match_brute_force(lengths: tuple[int, ...], window: int | None, causal: bool) -> None:
    n = sum(lengths)
    assert flops.visible_pairs(n, n, causal, "top-left", window, lengths) == brute(n, n, causal, "top-left", window,
                                                                                  lengths)


def test_no_mask_and_causal_are_unchanged() -> None:
    assert flops.visible_pairs(128, 256, False) == 128 * 256 == flops.unmasked_pairs(128, 256, False)
    assert flops.visible_pairs(32, 32, True) == 32 * 33 // 2
    # a window as long as the sequence is no window
    assert flops.visible_pairs(64, 64, True, window=64) == flops.visible_pairs(64, 64, True)


@pytest.mark.parametrize(("sq", "skv"), [(16, 16), (20, 12), (12, 20), (37, 37)])
@pytest.mark.parametrize("window", [None, 1, 5, 9])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("docs", [(), (3,), (5, 32)])
@pytest.mark.parametrize(("bm", "bn"), [(4, 4), (8, 4), (16, 16)])
def test_tiles_match_brute_force(sq: int, skv: int, window: int | None, causal: bool, docs: tuple[int, ...],
                                 bm: int, bn: int) -> None:
    if docs and (sq != skv or (len(docs) > 1 and sum(docs) != sq)):
        return
    used = total = pairs = 0
    for r0 in range(0, sq, bm):
        for c0 in range(0, skv, bn):
            total += 1
            rows, cols = range(r0, min(r0 + bm, sq)), range(c0, min(c0 + bn, skv))
            if any(visible(i, j, sq, skv, causal, "top-left", window, docs) for i in rows for j in cols):
                used += 1
                pairs += len(rows) * len(cols)
    assert flops.tile_pairs(sq, skv, causal, "top-left", window, docs, bm, bn) == (used, total, pairs)


def test_flex_density_at_4k() -> None:
    """A causal window of 1024 at s4096 in 128 x 128 tiles: each query block computes its diagonal tile and the 8
    before it (252 of 1024 tiles), 12 % more pairs than the window holds."""
    used, total, pairs = flops.tile_pairs(4096, 4096, True, "top-left", 1024, (), 128, 128)
    assert total == 32 * 32
    assert used == sum(min(qb + 1, 9) for qb in range(32))  # the diagonal tile and the 8 before it
    assert pairs / flops.visible_pairs(4096, 4096, True, "top-left", 1024) == pytest.approx(1.1248, abs=1e-4)


def test_spec_flops_and_roofs_count_the_mask() -> None:
    sp = AttentionSpec("eager", batch=2, seqlen_q=64, seqlen_kv=64, heads=4, kv_heads=4, head_dim=16, causal=True,
                       window=8, docs=(4,), device="cpu")
    pairs = brute(64, 64, True, "top-left", 8, (4,))
    assert flops.flops(sp) == 4 * 2 * 4 * pairs * 16
    work = AttentionWork.of(batch=2, heads=4, kv_heads=4, seqlen_q=64, seqlen_kv=64, head_dim=16, causal=True,
                            causal_align="top-left", window=8, docs=(4,))
    assert work.flops == flops.flops(sp) and work.exps == 2 * 4 * pairs
    w2 = shape_work(sp.shape_key, "eager")
    assert w2 is not None and w2.flops == work.flops
    row = {"backend": "eager", "batch": 2, "seqlen_q": 64, "seqlen_kv": 64, "heads": 4, "kv_heads": 4,
           "head_dim": 16, "dtype": "bf16", "causal": True, "causal_align": "top-left", "window": 8, "docs": [4]}
    w3 = AttentionWork.of_row(row)
    assert w3 is not None and w3.flops == work.flops


def test_shape_key_round_trip() -> None:
    sh = Shape(1, 4096, 4096, 32, 8, 128, "bf16", True, "bhsd", 1024, (1024, 3072))
    assert sh.key() == "b1,sq4096,skv4096,h32,kv8,d128,bf16,causal,w1024,docs1024+3072,bhsd"
    assert Shape.parse(sh.key()) == sh
    assert sh.label() == "b1 s4096 h32/8 d128 bf16 causal w1024 docs1024+3072"
    plain = Shape(1, 64, 64, 2, 2, 16)
    assert plain.key() == "b1,sq64,skv64,h2,kv2,d16,bf16,full,bhsd" and Shape.parse(plain.key()) == plain


def test_sweep_options_and_argv() -> None:
    s = AttentionSweep.from_strings(backend="flex,eager", seqlen="64", window="none,16", docs="none,4,16+48",
                                    device="cpu")
    specs = s.specs()
    assert len(specs) == 2 * 3 * 2
    assert {(x.window, x.docs) for x in specs} == {(w, d) for w in (None, 16) for d in ((), (4,), (16, 48))}
    argv = s.to_argv()
    assert argv[argv.index("--window") + 1] == "none,16" and argv[argv.index("--docs") + 1] == "none,4,16+48"
    assert AttentionSpec.from_dict(json.loads(json.dumps(specs[-1].to_dict()))) == specs[-1]
    assert "window" not in specs[0].to_dict() and "docs" not in specs[0].to_dict()


@pytest.mark.parametrize(("kw", "words"), [
    ({"window": "0"}, "--window must be a positive"),
    ({"window": "-3"}, "--window must be a positive"),
    ({"window": "wide"}, "--window 'wide' is not a number"),
    ({"docs": "0"}, "--docs must be a positive"),
    ({"docs": "8", "seqlen": "4"}, "8 documents cannot be packed into 4 tokens"),
    ({"docs": "16+16", "seqlen": "64"}, "add up to 32, not the sequence's 64"),
    ({"docs": "4", "seqlen_kv": "128"}, "must be equal"),
    ({"docs": "a+b"}, "neither a number of documents"),
])
def test_bad_masks_are_one_line(kw: dict[str, str], words: str) -> None:
    with pytest.raises(SpecError) as e:
        AttentionSweep.from_strings(backend="eager", device="cpu", **({"seqlen": "64"} | kw)).specs()
    assert words in str(e.value) and "\n" not in str(e.value)


def test_refusals() -> None:
    for b in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"):
        why = mask_refusal(b, 1024, ())
        assert why and why.startswith(f"{b} cannot take --window natively") and is_mask_refusal(why)
    assert mask_refusal("triton", None, (4,)) == ("triton cannot take --docs natively: profctl's Triton kernel "
                                                  "skips window blocks only")
    why = mask_refusal("triton", 64, (), "fwd+bwd")
    assert why and "backward" in why and is_mask_refusal(why)
    for b in ("flex", "flex-fa4", "fa4", "flash-attn", "eager"):
        assert mask_refusal(b, 1024, (4,), "fwd+bwd") is None
    assert mask_refusal("triton", 64, ()) is None
    assert mask_refusal("sdpa-flash", None, ()) is None  # no mask: nothing to refuse
    assert mask_refusal("my.py:attn", 64, ()) is None  # a function is judged when loaded
    assert "declares no mask" in (mask_refusal("my.py:attn", 64, (), declared=()) or "")


def test_reference_mask_counts_the_same_pairs() -> None:
    """The workload's float64 reference hides exactly the pairs profctl.flops does not count."""
    import torch

    from profctl.workloads.attention import hidden_pairs
    from profctl.workloads.backends import hidden_mask

    for sq, skv, c, w, docs in [(20, 20, True, 5, (3,)), (20, 20, False, 4, ()), (12, 30, True, 3, ()),
                                (30, 30, False, None, (7, 23))]:
        sp = AttentionSpec("eager", seqlen_q=sq, seqlen_kv=skv, heads=1, kv_heads=1, head_dim=8, causal=c, window=w,
                           docs=docs, device="cpu")
        hidden = hidden_pairs(sp, "cpu")
        assert int((~hidden).sum()) == flops.spec_pairs(sp)
        lengths = tuple(doc_lengths(docs, sq)) if docs else None
        assert torch.equal(hidden, hidden_mask(sq, skv, torch.device("cpu"), c, w, lengths))


def test_eager_and_triton_take_the_window() -> None:
    import torch

    from profctl.workloads.attention import reference
    from profctl.workloads.backends import eager

    torch.manual_seed(0)
    sp = AttentionSpec("eager", seqlen_q=24, seqlen_kv=24, heads=2, kv_heads=1, head_dim=8, causal=True, window=5,
                       docs=(3,), dtype="fp32", device="cpu")
    q, k, v = torch.randn(1, 2, 24, 8), torch.randn(1, 1, 24, 8), torch.randn(1, 1, 24, 8)
    o = eager(q, k, v, is_causal=True, window=5, doc_lengths=(8, 8, 8))
    assert torch.allclose(o.double(), reference(sp, q, k, v), atol=1e-5)
    if os.environ.get("TRITON_INTERPRET") == "1":  # the Triton forward skipping the blocks outside the window
        from profctl.workloads.kernels.triton_attention import attention

        sp2 = sp.with_(backend="triton", docs=())
        with torch.no_grad():
            o2 = attention(q, k, v, is_causal=True, window=5, enable_gqa=True)
        assert torch.allclose(o2.double(), reference(sp2, q, k, v), atol=1e-5)


@pytest.mark.slow
def test_bench_flex_and_eager_on_the_cpu(tmp_path: Path) -> None:
    """One compile of flex (a causal window over 4 documents, s64, about 15-30 s of Inductor on 2 cores); eager with
    its explicit mask; sdpa-flash refused in one line; flex's backward refused on the CPU."""
    r = CliRunner().invoke(app, [
        "bench", "--device", "cpu", "-b", "flex,eager,sdpa-flash", "-s", "64", "--heads", "2", "--kv-heads", "1",
        "-d", "16", "--causal", "--window", "16", "--docs", "4", "--iters", "3", "--warmup", "1",
        "--baseline", "none", "--reports", str(tmp_path), "-f", "json", "-o", str(tmp_path / "rows.json")])
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "rows.json").read_text())
    by = {x["backend"]: x for x in rows}
    pairs = brute(64, 64, True, "top-left", 16, (4,))
    for b in ("flex", "eager"):
        x = by[b]
        assert x["status"] == "ok" and x["check"] == "pass", x
        assert x["window"] == 16 and x["docs"] == [4] and x["visible_pairs"] == pairs
        assert x["flops"] == 4 * 2 * pairs * 16
    flex = by["flex"]
    assert flex["compile_ms"] > 0 and flex["block_mask_ms"] >= 0 and flex["compiles"] >= 1
    assert flex["recompiles_timed"] == 0 and flex["compile_ms"] > flex["median_ms"]
    assert flex["blocks_computed"] == 1 and flex["computed_pairs"] == 64 * 64
    assert by["sdpa-flash"]["status"] == "unsupported"
    assert "not run here: sdpa-flash (1 point(s)): sdpa-flash cannot take --window or --docs natively" in r.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert list((run_dir / "inductor").rglob("*.py")), "flex's generated code is kept in the run directory"


@pytest.mark.parametrize(("args", "words"), [
    (["--window", "0"], "--window must be a positive"),
    (["--docs", "8", "-s", "4"], "8 documents cannot be packed into 4 tokens"),
    (["--docs", "4", "--model", "gpt-tiny"], "--docs: attention-workload options do not apply with --model"),
])
def test_bad_masks_on_the_command_line(args: list[str], words: str, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["bench", "--device", "cpu", "-b", "eager", *(["-s", "64"] if "-s" not in args else []),
                                 *args, "--reports", str(tmp_path)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert not list(tmp_path.iterdir())


def test_seed_tables_keep_masks_apart(tmp_path: Path) -> None:
    """A window's rows are a panel of their own in a seed's layout, never a cell of the causal one."""
    base = {"backend": "eager", "batch": 1, "seqlen_q": 4096, "seqlen_kv": 4096, "heads": 16, "kv_heads": 16,
            "head_dim": 64, "dtype": "bf16", "causal": True, "pass": "fwd", "layout": "bhsd", "device": "cuda",
            "status": "ok", "median_ms": 2.0, "gpu_name": "NVIDIA H200"}
    rows = [base, {**base, "window": 1024, "docs": [4], "median_ms": 1.0}, {**base, "backend": "sdpa-cudnn"}]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    r = CliRunner().invoke(app, ["report", str(tmp_path / "rows.json"), "--table", "seed-004-forward", "-f",
                                 "markdown"])
    assert r.exit_code == 0, r.output
    titles = [ln for ln in r.stdout.splitlines() if ln.startswith("## ")]
    assert len(titles) == 2 and titles[0].endswith(", causal") and titles[1].endswith(", causal w1024 docs4")
