"""A user's attention function as a backend: `file.py:fn` and `module:fn` references, the Python API's
callables, and every bad reference as one line (real files, the real loader and the real workload, on CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import profctl
from profctl.cli import app
from profctl.spec import backend_label

USER = '''
import torch
import torch.nn.functional as F

def attention(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
attention.name = "mine"

def bottom_right(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    sq, skv = q.shape[-2], k.shape[-2]
    mask = None
    if is_causal:
        i = torch.arange(sq)[:, None]
        j = torch.arange(skv)[None, :]
        mask = j <= i + skv - sq
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=enable_gqa)
bottom_right.causal_align = "bottom-right"

def wrong(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=(scale or 1.0) * 2)

def frozen(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    with torch.no_grad():
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)

def raises(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    raise RuntimeError("kaboom on purpose")

def two_args(q, k):
    return q

not_callable = 3
'''
TINY = ["--device", "cpu", "--seqlen", "32", "--heads", "2", "--head-dim", "8", "--iters", "2", "--warmup", "1",
        "--baseline", "none", "-f", "json"]


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    p = tmp_path / "my_attn.py"
    p.write_text(USER)
    return p


def bench(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, ["bench", *TINY, "--reports", str(tmp_path / "runs"), *args])
    return r.exit_code, r.stdout, r.stderr


def test_file_and_module_references_run_and_are_checked(user_file: Path, tmp_path: Path) -> None:
    refs = f"{user_file}:attention,{user_file}:wrong,torch.nn.functional:scaled_dot_product_attention"
    rc, out, err = bench(["--backend", refs, "--pass", "fwd+bwd", "--causal", "true"], tmp_path)
    assert rc == 0, err
    rows = {r["backend"]: r for r in json.loads(out)}
    assert set(rows) == {"my_attn.attention", "my_attn.wrong", "functional.scaled_dot_product_attention"}
    mine = rows["my_attn.attention"]
    assert mine["status"] == "ok" and mine["check"] == "pass" and mine["label"] == "mine"
    assert mine["backend_ref"] == f"{user_file}:attention"
    assert rows["my_attn.wrong"]["check"] == "fail"  # a wrong function is reported as wrong, not as fast
    assert rows["functional.scaled_dot_product_attention"]["check"] == "pass"


def test_declared_alignment_counts_flops_and_checks_the_output(user_file: Path, tmp_path: Path) -> None:
    args = ["--seqlen-q", "16", "--seqlen-kv", "48", "--causal", "true"]
    r = CliRunner().invoke(app, ["bench", *[a for a in TINY if a not in ("--seqlen", "32")], *args,
                                 "--backend", f"{user_file}:bottom_right,{user_file}:attention",
                                 "--reports", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.stderr
    rows = {x["backend"]: x for x in json.loads(r.stdout)}
    br, tl = rows["my_attn.bottom_right"], rows["my_attn.attention"]
    assert br["causal_align"] == "bottom-right" and tl["causal_align"] == "top-left"
    assert br["check"] == "pass" and tl["check"] == "pass"  # each against the reference of its own alignment
    assert br["flops"] > tl["flops"]  # bottom-right with sq < skv sees more keys per query


def test_a_non_differentiable_function_is_unsupported_for_backward(user_file: Path, tmp_path: Path) -> None:
    rc, out, _ = bench(["--backend", f"{user_file}:frozen,eager", "--pass", "fwd,bwd"], tmp_path)
    assert rc == 0
    rows = {(r["backend"], r["pass"]): r for r in json.loads(out)}
    assert rows[("my_attn.frozen", "fwd")]["status"] == "ok"
    bwd = rows[("my_attn.frozen", "bwd")]
    assert bwd["status"] == "unsupported" and "not differentiable" in bwd["reason"]


def test_an_exception_on_first_call_is_a_row_and_the_sweep_goes_on(user_file: Path, tmp_path: Path) -> None:
    rc, out, _ = bench(["--backend", f"{user_file}:raises,eager"], tmp_path)
    assert rc == 0
    rows = {r["backend"]: r for r in json.loads(out)}
    assert rows["my_attn.raises"]["status"] == "error" and "kaboom on purpose" in rows["my_attn.raises"]["reason"]
    assert rows["eager"]["status"] == "ok"


@pytest.mark.parametrize(("ref", "needle"), [
    ("{dir}/nofile.py:fn", "no such file"),
    ("{file}:nope", "has no attribute 'nope'"),
    ("{file}:not_callable", "not a function"),
    ("{file}:two_args", "does not take (q, k, v, is_causal=..., scale=...)"),
    ("no_such_module_xyz:fn", "no module named 'no_such_module_xyz'"),
    ("{dir}/broken.py:fn", "syntax error"),
    ("my_attn.py:", "unknown backend"),
])
def test_bad_references_are_one_line_errors(user_file: Path, tmp_path: Path, ref: str, needle: str) -> None:
    (tmp_path / "broken.py").write_text("def fn(q, k, v, is_causal=False, scale=None:\n    return q\n")
    rc, _, err = bench(["--backend", ref.format(dir=tmp_path, file=user_file)], tmp_path)
    assert rc == 2
    (line,) = err.strip().splitlines()
    assert needle in line


def test_python_api_takes_a_callable(user_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(user_file.parent))
    import my_attn  # type: ignore[import-not-found]

    res = profctl.bench(backend=[my_attn.attention, "eager"], seqlen=32, heads=2, head_dim=8, device="cpu",
                        iters=2, warmup=1, reports=tmp_path / "runs")
    assert [r["status"] for r in res.rows] == ["ok", "ok"]
    assert res.rows[0]["backend"] == "my_attn.attention" and res.rows[0]["speedup"] is not None
    with pytest.raises(profctl.spec.SpecError, match="module level"):
        profctl.bench(backend=[lambda q, k, v, **kw: q], device="cpu")


def test_labels_are_filter_safe() -> None:
    assert backend_label("examples/my attn.py:attention") == "my_attn.attention"
    assert backend_label("torch.nn.functional:scaled_dot_product_attention") == \
        "functional.scaled_dot_product_attention"
    assert backend_label("sdpa-flash") == "sdpa-flash"
    assert not set(backend_label("a/b[c].py:f")) & set("/:[] ")
