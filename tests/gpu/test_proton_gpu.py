"""`profctl proton` on a GPU: profctl's Triton forward recorded with its scopes (counts that follow from the
launch's shape), a user's program with its own scopes, and the one-line errors of a program without Triton
kernels and of a program that fails first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from profctl.cli import app

pytestmark = pytest.mark.gpu

PROGRAM = '''
import torch, triton, triton.language as tl
import triton.profiler.language as pl

@triton.jit
def twice(x_ptr, y_ptr, N_ITER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(N_ITER):
        with pl.scope("double"):
            x = x * 2
        with pl.scope("add"):
            x = x + 1
    tl.store(y_ptr + offs, x)

x = torch.ones(4 * 128, device="cuda")
y = torch.empty_like(x)
twice[(4,)](x, y, N_ITER=3, BLOCK=128, num_warps=4)
torch.cuda.synchronize()
print("ok", float(y[0]))
'''


def _invoke(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["proton", "--reports", str(tmp_path / "reports"), *args])


def test_builtin_triton_forward_timeline(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    r = _invoke(tmp_path, "-b", "triton", "-s", "512", "--heads", "2", "-d", "64", "--overhead", "3", "-f", "json",
                "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    k = next(k for k in doc["kernels"] if k["kernel"] == "_fwd_kernel")
    scopes = {s["name"]: s for s in k["scopes"]}
    assert set(scopes) == {"load_q", "load_k", "load_v", "qk", "softmax", "pv", "store"}
    units = k["ctas"] * k["warps"]
    assert scopes["load_q"]["count"] == scopes["store"]["count"] == units  # once per warp of every CTA
    assert scopes["qk"]["count"] == scopes["softmax"]["count"] == scopes["pv"]["count"]
    assert scopes["qk"]["count"] % units == 0 and scopes["qk"]["count"] // units >= 1  # key blocks per CTA
    assert doc["meta"]["overhead"]["plain_us"] > 0 and doc["meta"]["overhead"]["scoped_us"] > 0
    run = next(p for p in (tmp_path / "reports").iterdir() if p.is_dir())
    assert (run / "case-0.chrome_trace").stat().st_size > 0 and (run / "case-0.timeline.json").is_file()
    again = CliRunner().invoke(app, ["report", str(run), "-f", "json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["kernels"][0]["scopes"] == k["scopes"]


def test_program_with_its_own_scopes(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "p.json"
    r = _invoke(tmp_path, "-f", "json", "-o", str(out), "--", "python", str(prog))
    assert r.exit_code == 0, r.output
    k = json.loads(out.read_text())["kernels"][0]
    scopes = {s["name"]: s["count"] for s in k["scopes"]}
    assert scopes == {"double": 3 * 4 * 4, "add": 3 * 4 * 4}  # 3 iterations x 4 warps x 4 CTAs


def test_a_program_without_triton_kernels_is_one_line(tmp_path: Path) -> None:
    prog = tmp_path / "plain.py"
    prog.write_text("import torch\nprint(torch.ones(3, device='cuda').sum().item())\n")
    r = _invoke(tmp_path, "--", "python", str(prog))
    assert r.exit_code != 0
    errors = [ln for ln in r.output.splitlines() if ln.startswith("profctl: error:")]
    assert len(errors) == 1 and "no Triton kernel with a Proton scope ran" in errors[0], r.output
    assert "Traceback" not in r.output


def test_a_program_that_fails_first_is_one_line(tmp_path: Path) -> None:
    prog = tmp_path / "bad.py"
    prog.write_text("raise SystemExit(3)\n")
    r = _invoke(tmp_path, "--", "python", str(prog))
    assert r.exit_code == 8, r.output
    assert "exited with status 3" in r.output and "Traceback" not in r.output


def test_a_sample_of_ctas_keeps_the_launchs_counts(tmp_path: Path) -> None:
    """--ctas N: the trace holds a few CTAs, the counts are every CTA's (the same as --ctas all records), the
    totals Proton's tree of every CTA; the progress lines and the manifest name each phase."""
    base = ["-b", "triton", "-s", "2048", "--heads", "8", "-d", "64", "--overhead", "0", "-f", "json"]
    got = {}
    for ctas in ("all", "4"):
        out = tmp_path / f"{ctas}.json"
        r = CliRunner().invoke(app, ["proton", "--reports", str(tmp_path / ctas), *base, "--ctas", ctas, "-o",
                                     str(out)])
        assert r.exit_code == 0, r.output
        assert "profctl: case-0: read" in r.output and "profctl: case-0: dump" in r.output, r.output
        assert "NO CTA SAMPLE" not in r.output, r.output  # the child's line when the sample did not take effect
        got[ctas] = next(k for k in json.loads(out.read_text())["kernels"] if k["kernel"] == "_fwd_kernel")
    every, few = got["all"], got["4"]
    assert few["ctas"] < every["ctas"] and few["ctas_total"] == every["ctas"] and "CTAs" in few["sample"]
    # counted and summed from the records of every CTA of the sampled launch, none scaled (Triton 3.6's buffer
    # layout read: header, write indexes, records, padding)
    assert "counts from the records of every CTA" in few["sample"], few["sample"]
    assert "total cycles from the records of every CTA" in few["sample"], few["sample"]
    assert "scaled" not in r.output, r.output
    assert {s["name"]: s["count"] for s in few["scopes"]} == {s["name"]: s["count"] for s in every["scopes"]}
    for s in few["scopes"]:  # another launch of the same kernel: close, not equal (a once-per-warp load varies more)
        t = next(x for x in every["scopes"] if x["name"] == s["name"])["total_cycles"]
        assert abs(s["total_cycles"] - t) <= (0.35 if s["name"] in ("load_q", "store") else 0.15) * t, (s, t)
    run = next(p for p in (tmp_path / "4").iterdir() if p.is_dir())
    man = json.loads((run / "manifest.json").read_text())
    phases = {p["phase"] for p in man["phases"]["case-0"]}
    assert phases >= {"compile", "run-sample", "dump", "read"} and "run-tree" not in phases, phases
    assert not (run / "case-0.hatchet").exists()  # the records gave every scope's cycles: no second launch
    assert man["sampled"]["case-0"]["layout"] == "timed"
    assert man["sampled"]["case-0"]["applied"] is True, man["sampled"]["case-0"].get("why")
    assert man["sampled"]["case-0"]["launches"] == 1
    assert man["sampled"]["case-0"]["kernels"]["_fwd_kernel"]["ctas_total"] == every["ctas"]


def test_a_program_sampled(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "p.json"
    r = _invoke(tmp_path, "-f", "json", "-o", str(out), "--ctas", "1", "--", "python", str(prog))
    assert r.exit_code == 0, r.output
    assert "NO CTA SAMPLE" not in r.output, r.output
    k = json.loads(out.read_text())["kernels"][0]
    assert {s["name"]: s["count"] for s in k["scopes"]} == {"double": 48, "add": 48}  # counted, every CTA
    assert "scaled" not in r.output and "counts from the records of every CTA" in k["sample"], (r.output, k)
    assert k["ctas"] < 4 and k["ctas_total"] == 4
