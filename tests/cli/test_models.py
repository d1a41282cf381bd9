"""The model workload through profctl (CPU, gpt-tiny): every mode as bench rows with throughput, FLOPs and
attention's share; an OOM row under a memory cap, refused before allocating; the seeds' tables from the rows;
options that do not apply refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

TINY = ["--model", "gpt-tiny", "--device", "cpu", "--seqlen", "32", "--batch", "2", "--iters", "2", "--warmup", "1"]


def bench(args: list[str], tmp_path: Path) -> tuple[int, list[dict], str]:
    r = CliRunner().invoke(app, ["bench", *args, "-f", "json", "--reports", str(tmp_path / "runs")])
    rows = json.loads(r.stdout) if r.stdout.strip().startswith("[") else []
    return r.exit_code, rows, r.stderr


def test_every_mode_gives_a_row_with_throughput_and_attention_share(tmp_path: Path) -> None:
    rc, rows, err = bench([*TINY, "--mode", "train,prefill,decode", "-b", "sdpa-math,eager"], tmp_path)
    assert rc == 0, err
    assert [(r["backend"], r["mode"], r["status"]) for r in rows] == [
        (b, m, "ok") for m in ("train", "prefill", "decode") for b in ("sdpa-math", "eager")]
    assert "6 of 6 points (gpt-tiny, 1 size, train, prefill, decode)" in err  # what ran, in the model's words
    for r in rows:
        assert r["workload"] == "model" and r["median_ms"] > 0 and r["tokens_per_s"] > 0
        assert 0 < r["attn_share"] < 1 and r["flops"] == r["model_flops"] > 0
        assert r["tflops"] == pytest.approx(r["flops"] / (r["median_ms"] * 1e-3) / 1e12)
        assert r["dtype"] == "fp32"
    train = [r for r in rows if r["mode"] == "train"]
    assert all(r["samples_per_s"] == pytest.approx(2 / (r["median_ms"] * 1e-3)) for r in train)
    assert all(r["speedup"] is not None for r in rows)  # against the eager baseline of the same case


def test_a_point_over_the_memory_cap_is_an_oom_row_before_allocating(tmp_path: Path) -> None:
    _, rows, _ = bench([*TINY, "--mode", "train,decode", "-b", "eager", "--memory-limit", "0.0006"], tmp_path)
    rows = {r["mode"]: r for r in rows}
    assert rows["train"]["status"] == "oom" and "refused before allocating" in rows["train"]["reason"]
    assert rows["decode"]["status"] == "ok"  # the decode step's estimate fits the same cap


def test_the_seeds_tables_come_out_of_the_rows(tmp_path: Path) -> None:
    args = [a if a != "32" else "32,64" for a in TINY]  # two contexts: a table against context length
    rc, rows, err = bench([*args, "--mode", "train,decode", "-b", "sdpa-math,eager"], tmp_path)
    assert rc == 0, err
    f = tmp_path / "rows.json"
    f.write_text(json.dumps(rows))
    r = CliRunner().invoke(app, ["report", str(f), "-f", "markdown"])
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    for title in ("Step time", "MFU and attention's share", "Peak memory", "Tokens/s against context",
                  "Training samples/s"):
        assert title in out
    step = out.split("## Step time")[1].split("##")[0]
    assert "| gpt-tiny | - | train | 2 | 64 | fp32 |" in step and "sdpa-math" in step
    split = out.split("## Training step: forward / backward / optimizer")[1].split("##")[0]
    train = {(r["backend"], r["seqlen"]): r for r in rows if r["mode"] == "train"}
    t = train[("eager", 64)]
    assert f"{t['forward_ms']:.2f} / {t['backward_ms']:.2f} / {t['optimizer_ms']:.2f}" in split
    assert "decode" not in split and t["forward_ms"] > 0 and t["backward_ms"] > 0
    r = CliRunner().invoke(app, ["report", str(f), "-f", "html", "-o", str(tmp_path / "m.html")])
    assert r.exit_code == 0, r.stderr
    page = (tmp_path / "m.html").read_text()
    assert page.count("<img") >= 2 and "Training samples/s" in page


@pytest.mark.parametrize(("args", "needle"), [
    (["--model", "gpt-tiny", "--heads", "4"], "--heads: attention-workload options do not apply with --model"),
    (["--mode", "train"], "--mode: model options need --model"),
    (["--model", "gpt-huge"], "unknown model 'gpt-huge'"),
    (["--model", "gpt-tiny", "--mode", "serve"], "unknown mode 'serve'"),
])
def test_options_that_do_not_apply_are_refused(tmp_path: Path, args: list[str], needle: str) -> None:
    rc, _, err = bench([*args, "--device", "cpu"], tmp_path)
    assert rc == 2
    (line,) = err.strip().splitlines()
    assert needle in line


def test_the_python_api_runs_the_model_workload(tmp_path: Path) -> None:
    import profctl

    res = profctl.bench(model="gpt-tiny", mode=["prefill", "decode"], seqlen=32, batch=2, backend=["sdpa-math"],
                        device="cpu", iters=2, warmup=1, baseline=None, reports=tmp_path)
    df = res.to_dataframe()
    assert list(df["mode"]) == ["prefill", "decode"] and set(df["status"]) == {"ok"}
    assert (df["tokens_per_s"] > 0).all()


def test_every_mode_puts_a_part_at_case_measure_part(tmp_path: Path) -> None:
    """The NVTX shape ncu's filter relies on, seen in a real torch.profiler trace of train and decode steps:
    ``<case>/measure/attn.core`` (decode.step is not a level); and the filter ncu gets has no '/' in a group."""
    from profctl.model_spec import ModelSweep
    from profctl.pipelines.ncu_pipeline import model_filter
    from profctl.pipelines.targets import Model

    r = CliRunner().invoke(app, ["torch", "--model", "gpt-tiny", "--device", "cpu", "--seqlen", "32", "--mode",
                                 "train,decode", "-b", "eager", "--iters", "1", "--warmup", "0", "-f", "json",
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    paths = {c["nvtx_range"] for c in json.loads(r.stdout)["cpu_ops"] if c["nvtx_range"]}
    assert not any("decode.step" in p for p in paths), paths
    # between the decode case and its attention: nothing but the phase (torch's trace starts inside 'measure',
    # so there the phase range itself is not recorded)
    decode = {p.split("/", 1)[1] for p in paths if p.startswith("eager[gpt-tiny,decode") and p.endswith("attn.core")}
    assert decode and decode <= {"attn.core", "measure/attn.core"}, decode

    target = Model(ModelSweep.from_strings(model="gpt-tiny", mode="train,decode", backend="eager", device="cpu"))
    rx = model_filter(target.resolve(), "attn.core")
    assert rx.startswith("regex:profctl@(") and rx.endswith("/measure/attn\\.core/")
    depth = 0
    for ch in rx:
        depth += ch == "("
        depth -= ch == ")"
        assert not (ch == "/" and depth), f"'/' inside a group: {rx}"
