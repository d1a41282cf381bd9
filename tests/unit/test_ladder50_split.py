"""Issue 50, ladder step 13: explain's advice for the warp-specialized FP8 kernel ("latency-bound: interleave two
tiles") followed, and the step lost time. Recorded with plain ncu (tests/data/ladder50/README.md, fp8_split): the
kernel with 128-key blocks (`fp8@m128n128w4s3-ws-gl`) and with 192-key blocks held as two tiles, 128 + 64 keys, two
Q·Kᵀ and two P·V wgmma a turn (`fp8@m128n192w4s3-ws-gl`, gluon_fp8_attention.SPLIT). A step that makes the kernel
slower is scored as such: nothing went away, nothing is tallied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytest.importorskip("ncu_report")

SPLIT = str(Path(__file__).resolve().parents[1] / "data" / "ladder50" / "fp8_split.ncu-rep.xz")
A, B = "fp8@m128n128w4s3-ws-gl", "fp8@m128n192w4s3-ws-gl"


def _explain(store: Path, *args: str) -> dict:
    r = CliRunner().invoke(app, ["explain", *args, "--reports", str(store), "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_the_fp8_ws_kernel_reads_latency_bound_and_two_tiles_a_block_do_not_fix_it(tmp_path: Path) -> None:
    alone = _explain(tmp_path, SPLIT, "-k", A)
    first = alone["causes"][0]
    assert first["id"] == "latency-bound" and "interleave two tiles" in first["fix"]
    assert first["saving_us"] == pytest.approx(177.2, abs=2.0)
    assert "register-shuffle" not in [c["id"] for c in alone["causes"]]  # the two tiles' extra shuffles: no cause

    pair = _explain(tmp_path, SPLIT, SPLIT, "-k", A, "--vs", B, "--changed")
    scored = " ".join(pair["before_and_after"])
    assert "lost 7.4 us" in scored and "none of the 1 cause(s) predicted before went away" in scored
    tally = tmp_path / "predictions" / "tally.json"
    assert not tally.exists() or "latency-bound" not in tally.read_text()
