"""`profctl explain` and `profctl report --view source|stalls` through the CLI, on reports recorded with plain ncu
(tests/data/planted): formats, a second report, bad input with one line and a non-zero exit."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytest.importorskip("ncu_report")

PLANTED = Path(__file__).resolve().parents[1] / "data" / "planted"
PAIR = str(PLANTED / "attn_pair.ncu-rep.xz")
CUDA = str(PLANTED / "planted_cuda.ncu-rep.xz")


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_explain_one_report_two_kernels_table() -> None:
    code, out, err = run("explain", PAIR, "--kernel", "_fwd_kernel", "--vs", "cudnn", "--shape", "b1,s4096,h32,d128")
    assert code == 0, err
    assert "A is 12.4% slower" in out
    assert "where the gap comes from" in out and "stall: barrier" in out
    assert "% of the tensor roof" in out
    assert "triton_attention.py:85" in out  # A's hottest line (tl.dot)
    assert "WARPGROUP.DEPBAR" in out  # B has no source: its hottest instructions


def test_explain_json_and_markdown(tmp_path: Path) -> None:
    code, out, err = run("explain", PAIR, "-k", "_fwd", "--vs", "cudnn", "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "profctl.explain/4"
    assert doc["causes"][0]["id"] in ("barrier-sync", "mma-not-overlapped") and doc["causes"][0]["lines"]
    assert {"id", "title", "lines", "saving_us", "evidence", "fix"} <= set(doc["causes"][0])
    assert doc["factors"][0]["name"] == "stall: barrier"
    assert doc["a"]["lines"][0]["line"] == 85
    assert doc["a"]["roofs"] is None  # no shape in the plain script's NVTX ranges and none given
    md = tmp_path / "e.md"
    code, _, err = run("explain", PAIR, "-k", "_fwd", "--vs", "cudnn", "-f", "markdown", "-o", str(md))
    assert code == 0, err
    assert "| stall: barrier |" in md.read_text()


def test_explain_one_kernel_alone_ranks_its_causes_against_its_roofs() -> None:
    code, out, err = run("explain", PAIR, "--kernel", "_fwd", "--shape", "b1,s4096,h32,d128,bf16", "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["b"] is None and doc["gap_us"] is None and doc["saving_out_of"]["what"] == "A's time"
    assert doc["causes"] and doc["causes"][0]["saving_us"] > 0 and doc["a"]["roofs"]["binding"] == "tensor"
    code, out, err = run("explain", PAIR, "--kernel", "_fwd")
    assert code == 0, err
    assert "Causes, ranked by the time fixing each is predicted to save" in out
    assert "premise: no attention-shape roofs" in out and "--shape" in out and "verdict: " in out


def test_explain_two_reports_the_same_kernel(tmp_path: Path) -> None:
    other = tmp_path / "after.ncu-rep.xz"
    shutil.copyfile(PAIR, other)
    code, out, err = run("explain", PAIR, str(other), "--kernel", "_fwd_kernel")
    assert code == 0, err
    assert "A is 0.0% slower" in out or "A is 0.0% faster" in out


@pytest.mark.parametrize("args, code, says", [
    (("explain", PAIR, "--kernel", "flash_fwd", "--vs", "cudnn"), 7,
     "'flash_fwd' matches no kernel in"),
    (("explain", PAIR, "--kernel", "_fwd", "--vs", "_fwd"), 2, "pick the same launch"),
    (("explain", PAIR, "--kernel", "(", "--vs", "cudnn"), 2, "not a regular expression"),
    (("explain", PAIR, "--kernel", "_fwd", "--vs", "cudnn", "--shape", "b1,x9"), 2, "--shape"),
    (("explain", str(PLANTED / "planted_cuda_details.csv.xz"), "-k", "a", "--vs", "b"), 5, ""),
])
def test_explain_bad_input_is_one_line(args: tuple[str, ...], code: int, says: str) -> None:
    rc, out, err = run(*args)
    assert rc == code, (out, err)
    assert says in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_report_view_source_and_stalls() -> None:
    code, out, err = run("report", CUDA, "--view", "source", "--kernel", "smem_conflict", "-f", "markdown")
    assert code == 0, err
    assert "PLANT: bank conflict" in out and "32-way bank conflict" in out
    code, out, err = run("report", CUDA, "--view", "stalls", "--kernel", "exp_loop", "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kernels"][0]["stalls"][0]["reason"] == "mio_throttle"


def test_report_view_source_html(tmp_path: Path) -> None:
    page = tmp_path / "src.html"
    code, _, err = run("report", str(PLANTED / "planted_triton.ncu-rep.xz"), "--view", "source", "-k", "row_stats",
                       "-f", "html", "-o", str(page))
    assert code == 0, err
    text = page.read_text()
    assert "PLANT: tl.sum" in text and 'class="hot"' in text and "rgba(220,40,40," in text


def test_source_html_is_one_row_per_line_and_readable(tmp_path: Path) -> None:
    """Issue 29 item 6: `pre.src span{display:block}` also hit the line-number and share spans inside a line, so
    every source line took three rows, and the hottest line's number was grey on dark red. One row per line (the
    rule hits only a line's own span), and every shade keeps the text readable (contrast >= 4.5, WCAG AA); in
    headless Chromium, when it is installed, the hottest line's band is one text row high."""
    from profctl.render import source_view

    page = tmp_path / "src.html"
    code, _, err = run("report", CUDA, "--view", "source", "-k", "gather_strided", "-f", "html", "-o", str(page))
    assert code == 0, err
    text = page.read_text()
    assert "pre.src>span{display:block" in text and "pre.src span{" not in text
    excerpt = text[text.index('<pre class="src">'):]
    excerpt = excerpt[:excerpt.index("</pre>")]
    lines = re.findall(r'<span(?: class="hot")?(?: style="[^"]*")?><span class="ln">(\d+)</span>', excerpt)
    assert len(lines) >= 5 and excerpt.count('<span class="ln">') == len(lines)

    def luminance(rgb: tuple[float, ...]) -> float:
        c = [v / 255 for v in rgb]
        c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    alpha = 0.08 + source_view.MAX_SHADE  # the hottest line
    bg = tuple(255 * (1 - alpha) + v * alpha for v in (220, 40, 40))
    for fg in ((0x33,) * 3, (0x22,) * 3):  # .ln / .sh, and the source
        hi, lo = sorted((luminance(bg), luminance(fg)), reverse=True)
        assert (hi + 0.05) / (lo + 0.05) >= 4.5
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("no Chromium here for the layout check")
    shot = tmp_path / "src.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1100,6000", page.as_uri()], capture_output=True, timeout=120)
    import numpy as np
    from PIL import Image

    a = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    hot = bg  # the hottest line's own colour, rows of it in the first excerpt
    mask = (np.abs(a - np.array(hot)).sum(axis=2) < 12).sum(axis=1) > 400
    rows = np.flatnonzero(mask)
    assert rows.size, "no hottest line found in the screenshot"
    band = rows[rows < rows[0] + 60]  # the first band: 12px text at line-height 1.35
    assert 12 <= band.size <= 20, band.size  # one text row, not three


def test_report_view_source_on_a_report_without_samples(shared_fixture) -> None:
    code, _, err = run("report", str(shared_fixture("flash_sol.ncu-rep")), "--view", "source")
    assert code == 5
    assert "--recipe stalls" in err and "SourceCounters" in err


def test_report_view_source_kernel_matches_nothing() -> None:
    code, _, err = run("report", CUDA, "--view", "source", "--kernel", "nosuch")
    assert code == 7
    assert "its kernels: gather_strided" in err


def test_report_view_source_refuses_other_views_options() -> None:
    code, _, err = run("report", CUDA, "--view", "stalls", "--by-range")
    assert code == 2 and "--by-range" in err
    code, _, err = run("report", CUDA, "--kernel", "x")
    assert code == 2 and "--kernel" in err


def _bit_flipped(data_file, tmp_path: Path) -> Path:
    """nvtx_mixed.ncu-rep with one bit flipped in its first result (byte 30403, 0x02 -> 0x0a): ncu_report then
    returns that launch with no name and no metrics, which profctl read as `<unnamed launch 0>` at 0 ns."""
    b = bytearray(data_file("nvtx_mixed.ncu-rep").read_bytes())
    assert b[30403] == 0x02
    b[30403] ^= 0x08
    p = tmp_path / "flipped.ncu-rep"
    p.write_bytes(bytes(b))
    return p


@pytest.mark.parametrize("args", [
    ("report", "{rep}"), ("report", "{rep}", "-f", "json"), ("report", "{rep}", "--view", "source"),
    ("report", "{rep}", "--view", "stalls"), ("explain", "{rep}", "--kernel", "nvjet", "--vs", "elementwise"),
])
def test_a_bit_flipped_report_is_damaged_not_data(data_file, tmp_path: Path, args: tuple[str, ...]) -> None:
    """Issue 29 item 5: the reader refuses a launch ncu_report could not decode, so every command that reads the
    report says it is damaged (exit 5, one line) instead of showing unnamed 0 ns launches or 'its kernels: none'."""
    rep = _bit_flipped(data_file, tmp_path)
    rc, out, err = run(*(a.format(rep=rep) for a in args))
    assert rc == 5, (out, err)
    assert out == "" and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert "a damaged Nsight Compute report: launch 0 has no kernel name and no metrics" in line


FWDBWD = str(Path(__file__).resolve().parents[1] / "data" / "pairs" / "profctl_sdpa_tensor_core_fwdbwd.ncu-rep.xz")


def test_vs_picks_the_kernel_of_the_same_pass_and_a_forward_against_a_backward_is_said() -> None:
    """SDPA's FA2, memory-efficient and cuDNN kernels, forward and backward, on the tensor-core recipe (H200,
    tests/data/pairs/README.md). `--vs cudnn` for FA2's backward kernel is cuDNN's main backward kernel (not the
    first cuDNN launch, its forward, nor the small helpers of its backward); naming a forward kernel for a backward
    one is said as a premise. Without the instruction mix, legacy-mma comes from the wgmma count."""
    code, out, _ = run("explain", FWDBWD, "--kernel", "flash_bwd_dq_dk_dv", "--vs", "cudnn", "-f", "json")
    assert code == 0
    d = json.loads(out)
    assert "bprop" in d["b"]["kernel"] and d["b"]["nvtx"].endswith(".bwd")
    assert d["causes"][0]["id"] == "legacy-mma"
    assert not any("forward" in p for p in d["premises"])
    assert any("longest of the bwd pass" in n for n in d["chosen"])

    code, out, _ = run("explain", FWDBWD, "--kernel", "flash_bwd_dq_dk_dv", "--vs", "fprop", "-f", "json")
    assert code == 0
    d = json.loads(out)
    assert any("A is a backward kernel and B a forward one" in p for p in d["premises"])

    for a, b in (("flash_fwd_kernel", "cudnn"), ("fmha_cutlassF", "cudnn"), ("fmha_cutlassB", "cudnn")):
        code, out, _ = run("explain", FWDBWD, "--kernel", a, "--vs", b, "-f", "json")
        d = json.loads(out)
        assert code == 0 and d["causes"][0]["id"] == "legacy-mma", (a, [c["id"] for c in d["causes"]])
        assert d["a"]["nvtx"].rsplit(".", 1)[-1] == d["b"]["nvtx"].rsplit(".", 1)[-1]  # the same pass


def test_explain_without_samples_shows_no_empty_hot_table_and_says_the_choice_first() -> None:
    """Issue 39, item 6: a report without warp samples (the H100 tensor-core recipe) printed an 'A: hot instructions'
    table of 0 samples; how 'flash' was chosen sat below the gap table."""
    h100 = Path(__file__).resolve().parents[1] / "data" / "h100-sm90" / "attn_tc.ncu-rep.xz"
    code, out, err = run("explain", str(h100), "--kernel", "flash_fwd", "--vs", "cudnn")
    assert code == 0, err
    assert "hot instructions" not in out and "hot lines" not in out
    assert "premise: no warp-state samples" in out


def test_a_finding_is_shown_by_the_sentence_that_says_what_was_found() -> None:
    from profctl.render.source_view import _first_sentence

    tail = ("A wave of thread blocks is defined as the maximum number of blocks that can be executed in parallel on "
            "the target GPU. This kernel launch results in 1 full waves and a partial wave of 1 thread blocks. "
            "Under the assumption of uniform thread blocks, this may account for up to 50.0%.")
    assert _first_sentence(tail).startswith("This kernel launch results in 1 full waves")
    assert _first_sentence("Nothing measured here. Really.") == "Nothing measured here."


def test_the_stall_advice_names_the_ordered_overlap_not_the_one_inside_a_warpgroup() -> None:
    """Both overlaps inside one warpgroup were measured not to pay (issue 33: 28 % slower; issue 50: 1 % with
    registers to spare): the wgmma-wait advice names two warpgroups taking turns and says so."""
    from profctl.analysis.stalls import AT_OPCODE, REASONS

    for text in (AT_OPCODE[("barrier", "WARPGROUP.DEPBAR")], REASONS["warpgroup_arrive"].fix):
        assert "ping-pong" in text and "measured not to pay" in text and "registers a thread" not in text


def test_the_verdict_is_the_first_line_after_the_kernel_names_in_both_modes(tmp_path: Path) -> None:
    """Issue 47 item 5: a pair's verdict ("A is N us slower than B; most of it is X") and one kernel's come right
    after the A/B lines, before the premises; the JSON has one verdict (the floor's dict none of its own)."""
    fixes = str(Path(__file__).resolve().parents[1] / "data" / "fixes" / "fixes_attn.ncu-rep.xz")
    for args, start in (((fixes, "-k", r"attn_num_stages\.a$", "--vs", r"attn_num_stages\.b$"),
                         "verdict: A is 327.8 us slower than B"),
                        ((PAIR, "-k", "_fwd_kernel"), "verdict: the tensor pipe sets the floor")):
        code, out, err = run("explain", *args, "--reports", str(tmp_path))
        assert code == 0, err
        lines = [ln for ln in out.splitlines() if not ln.startswith("  ")]
        first = next(i for i, ln in enumerate(lines) if not ln.startswith(("A: ", "B: ")))
        assert lines[first].startswith(start), lines[:4]
    code, out, _ = run("explain", fixes, "-k", r"attn_num_stages\.a$", "--vs", r"attn_num_stages\.b$", "-f", "json",
                       "--reports", str(tmp_path))
    doc = json.loads(out)
    assert doc["verdict"].startswith("A is") and "loads-not-pipelined" in doc["verdict"]
    assert doc["causes"][0]["id"] == "loads-not-pipelined"  # not occupancy-registers, which B has to the same degree
    assert all("verdict" not in (f or {}) for f in doc["floor"].values())


def test_explain_without_a_kernel_names_the_kernels_and_says_where_the_prediction_is_kept(tmp_path: Path) -> None:
    code, _, err = run("explain", CUDA, "--reports", str(tmp_path))
    assert code == 2 and "--kernel" in err and "gather_strided" in err and len(err.strip().splitlines()) == 1
    code, out, err = run("explain", CUDA, "-k", "gather_strided", "--reports", str(tmp_path))
    assert code == 0, err
    kept = list((tmp_path / "predictions").glob("*.json"))
    assert len(kept) == 1 and kept[0].name in re.sub(r"\s+", "", out)
