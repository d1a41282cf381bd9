"""The HTML page and its plots, checked by opening them: parse the page, decode every embedded PNG and look at
its pixels, and read the numbers back out of the tables."""

from __future__ import annotations

import base64
import gzip
import html
import io
import json
import re
import struct
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from profctl import readers
from profctl.analysis.backend_table import build as compare
from profctl.analysis.crosstool import join as merge_view
from profctl.render import backend_table_plots, backend_table_view, plots

mpimg = pytest.importorskip("matplotlib.image")

DATA = Path(__file__).resolve().parent.parent / "data"
FIXTURE_SHAPE = "b4,sq2048,skv2048,h16,kv16,d128,bf16,causal,bhsd"


class Page(HTMLParser):
    """Images (alt, src), figure ids and table cells of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[tuple[str, str]] = []
        self.figures: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.external: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "img":
            self.images.append((a.get("alt", ""), a.get("src", "")))
        if tag == "figure":
            self.figures.append(a.get("id", ""))
        if tag in ("script", "link", "iframe") or (tag == "img" and not a.get("src", "").startswith("data:")):
            self.external.append(tag)
        if tag == "table":
            self._table = a.get("class", "")
            self.tables[self._table] = []
        if tag == "tr" and self._table is not None:
            self._row = []
        if tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        if tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from the PNG header (no image library)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", png[16:24])
    return w, h


def decode(src: str) -> tuple[bytes, np.ndarray]:
    m = re.fullmatch(r"data:image/png;base64,([A-Za-z0-9+/=]+)", src)
    assert m, src[:60]
    png = base64.b64decode(m[1])
    return png, mpimg.imread(io.BytesIO(png), format="png")


def assert_drawn(png: bytes, img: np.ndarray) -> None:
    w, h = png_size(png)
    assert img.shape[0] == h and img.shape[1] == w
    assert w >= 300 and h >= 200
    rgb = img[..., :3]
    # not blank: many distinct colours, and a good part of the picture is not background white
    assert len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 20
    assert (rgb.mean(axis=2) < 0.9).mean() > 0.02


def table_dicts(rows: list[list[str]]) -> list[dict[str, str]]:
    head, *body = rows
    return [dict(zip(head, r, strict=False)) for r in body]


def bench4096() -> list[dict]:
    with gzip.open(DATA / "bench_h100_s4096.json.gz", "rt") as f:
        return json.load(f)


@pytest.fixture
def fixture_page(shared_fixture):
    ss = [readers.read(shared_fixture(n), by_range=True)
          for n in ("attn.sqlite", "attn_tc.ncu-rep", "torch_trace.json.gz")]
    view = merge_view(ss, shape=FIXTURE_SHAPE)
    c = compare(view)
    text = backend_table_view.to_html(c, view, title="fixtures")
    p = Page()
    p.feed(text)
    return text, p, c


def test_fixture_page_structure(fixture_page):
    text, p, _c = fixture_page
    assert text.startswith("<!DOCTYPE html>") and "</html>" in text
    assert p.external == []  # self-contained: no script, stylesheet or remote image
    assert p.figures == ["plot-time", "plot-tflops", "plot-speedup", "plot-roofline", "plot-breakdown"]
    assert len(p.images) == 5
    for _alt, src in p.images:
        png, img = decode(src)
        assert_drawn(png, img)
    assert {"backends", "breakdown", "kernels", "sources"} <= set(p.tables)


def test_fixture_page_numbers(fixture_page):
    _, p, c = fixture_page
    rows = table_dicts(p.tables["backends"])
    flash = next(r for r in rows if r["backend"] == "sdpa-flash" and r["pass"] == "fwd")
    want = next(r for r in c.rows if r.backend == "sdpa-flash" and r.pass_ == "fwd")
    assert flash["ms"] == f"{want.time_ms:.4f}" == "0.2737"
    assert float(flash["TFLOP/s"].replace(",", "")) == pytest.approx(want.tflops, abs=0.05)
    assert flash["speedup"] == f"{want.speedup:.2f}x"
    assert flash["tensor %"] == "52" and flash["main kernel"] == "flash_fwd_kernel"  # one figure: % of active cycles
    assert flash["shape"] == "b4 s2048 h16 d128 bf16 causal"
    kernels = table_dicts(p.tables["kernels"])
    fk = next(k for k in kernels if k["kernel"] == "flash_fwd_kernel")
    assert fk["match"] == "exact" and fk["nsys us/it"] == "273.7" and fk["ncu us/it"] == "278.1"
    assert len(table_dicts(p.tables["sources"])) == 3


def test_roofline_pixels_show_points(fixture_page):
    """The roofline has coloured markers: pixels of the backends' colours are present."""
    _, p, _ = fixture_page
    (src,) = [s for a, s in p.images if a.startswith("Roofline")]
    _, img = decode(src)
    rgb = (img[..., :3] * 255).astype(int)
    for backend in ("sdpa-flash", "sdpa-cudnn"):
        hexc = plots.COLORS[backend].lstrip("#")
        col = np.array([int(hexc[i:i + 2], 16) for i in (0, 2, 4)])
        assert (np.abs(rgb - col).sum(axis=2) < 30).sum() > 20, backend


def test_bench_page_against_seqlen():
    """Bench rows at several sequence lengths give line plots; memory comes from the rows."""
    rows = []
    for r in bench4096():
        for s, f in ((2048, 0.25), (4096, 1.0)):
            x = dict(r, seqlen_q=s, seqlen_kv=s)
            if x.get("median_ms"):
                x["median_ms"] = r["median_ms"] * f
                x["peak_mem_bytes"] = int(r["peak_mem_bytes"] * f)
            rows.append(x)
    view = merge_view([], rows, device="NVIDIA H100 80GB HBM3")
    c = compare(view)
    text = backend_table_view.to_html(c, view)
    p = Page()
    p.feed(text)
    assert p.figures == ["plot-time", "plot-tflops", "plot-speedup", "plot-memory"]
    for _, src in p.images:
        assert_drawn(*decode(src))
    # two panels (causal, non-causal) side by side: wider than tall
    png, _ = decode(p.images[0][1])
    w, h = png_size(png)
    assert w > 1.5 * h
    backends = table_dicts(p.tables["backends"])
    assert len(backends) == len(rows)
    assert any(r["status"].startswith("unsupported") for r in backends)


def test_a_line_joins_only_points_of_one_case():
    """Issue 29 item 6: `report reports/ -f html` joined points of other heads, head dims and dtypes into one
    zig-zag line per backend. A line is one backend in one case (batch, heads, kv heads, head dim, dtype, layout,
    key length); its label names what differs between the lines."""
    rows = []
    for r in bench4096():
        for s, f in ((2048, 0.25), (4096, 1.0)):
            for heads, d in ((32, 128), (16, 64)):
                x = dict(r, seqlen_q=s, seqlen_kv=s, heads=heads, kv_heads=heads, head_dim=d)
                if x.get("median_ms"):
                    x["median_ms"] = r["median_ms"] * f * heads * d / 4096
                rows.append(x)
    c = compare(merge_view([], rows, device="NVIDIA H100 80GB HBM3"))
    fig = backend_table_plots.by_seqlen_figure(c, lambda r: r.time_ms, ylabel="ms", title="Time")
    ok = {(r.backend, r.pass_, r.causal) for r in c.rows if r.status == "ok" and r.time_ms is not None}
    for ax in fig.axes:
        labels = [ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        assert labels and all(re.fullmatch(r"\S+ h(16|32) d(64|128)", lab) for lab in labels), labels
        assert len(labels) == len(set(labels))
        for ln in ax.get_lines():  # every line: one point per sequence length, in order, never two at one length
            xs = list(ln.get_xdata())
            assert xs == sorted(set(xs)), (ln.get_label(), xs)
    backends = {b for b, _, _ in ok}
    assert sum(len(ax.get_lines()) for ax in fig.axes) == 2 * sum(
        len({b for b, p, cz in ok if (p, cz) == panel}) for panel in {(p, cz) for _, p, cz in ok})
    assert backends
    import matplotlib.pyplot as plt

    plt.close(fig)
    one = backend_table_plots.series([r for r in c.rows if r.shape_key and ",h32," in r.shape_key])
    assert all(label == b for b, label, _ in one)  # nothing differs: the label is the backend alone


def test_plots_need_matplotlib(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    from profctl.errors import ToolNotFound

    with pytest.raises(ToolNotFound) as e:
        plots.require()
    assert "pip install 'profctl[plot]'" in e.value.one_line()
    assert "\n" not in e.value.one_line()


def test_page_fits_a_laptop_screen(fixture_page):
    """Text at most 1280 px wide; every table in a box that scrolls on its own; long cells wrap."""
    text, _, _ = fixture_page
    css = re.search(r"<style>(.*?)</style>", text, re.S)[1]
    assert "max-width:1280px" in css and ".tbl{max-width:100%;overflow-x:auto" in css
    assert "td.w{white-space:normal" in css
    assert text.count('<div class="tbl"><table') == text.count("<table")


def test_kernel_names_keep_their_full_name(fixture_page):
    """The kernel table shows the short name; the cell's tooltip holds the whole demangled name."""
    text, _, _ = fixture_page
    cells = re.findall(r'<td class="l" title="([^"]+)">([^<]+)</td>', text)
    full = {html.unescape(t): html.unescape(s) for t, s in cells}
    flash = [t for t, s in full.items() if s == "flash_fwd_kernel"]
    assert flash and all("flash_fwd_kernel<Flash_fwd_kernel_traits<" in t and len(t) > 60 for t in flash)


def test_roofline_points_are_numbered_and_tabled(fixture_page):
    text, p, c = fixture_page
    rows = table_dicts(p.tables["roofline"])
    assert [r["#"] for r in rows] == [str(i) for i in range(1, len(c.roofline) + 1)]
    assert len({r["kernel"] for r in rows}) >= 2 and all(r["kernel"] and r["kernel"] != "-" for r in rows)
    assert "each point is numbered" in text


def test_sources_are_never_absolute(tmp_path):
    """A summary made on another machine names its report there; the page shows <run-id>/<file>."""
    from profctl.schema import KernelRow, Source, Summary

    rng = "sdpa-flash[b1,sq1024,skv1024,h8,kv8,d64,bf16,full,bhsd]/measure/sdpa-flash.fwd"
    k = KernelRow(tool="nsys", name="flash_fwd_kernel", short_name="flash_fwd_kernel", kernel_class="flash_fwd",
                  nvtx_range=rng, count=1, total_ns=1e5, avg_ns=1e5, med_ns=1e5, min_ns=1e5, max_ns=1e5, std_ns=0)
    s = Summary(sources=(Source("/tmp/pr/20261121T201340Z-nsys-cb98e6/profile.sqlite", "nsys", "2025.3"),),
                kernels=(k,))
    view = merge_view([s])
    text = backend_table_view.to_html(compare(view), view)
    p = Page()
    p.feed(text)
    assert table_dicts(p.tables["sources"])[0]["path"] == "20261121T201340Z-nsys-cb98e6/profile.sqlite"
    assert "/tmp/pr" not in text


def test_bound_is_explained_on_the_page(fixture_page):
    text, _, _ = fixture_page
    assert "launch-bound when the launch gap is over 50%" in text


# ------------------------------------------------------------------ issue 39 item 10: notes, captions, widths
def _captions(text: str) -> dict[str, str]:
    return {pid: html.unescape(cap) for pid, cap in
            re.findall(r'<figure id="plot-([\w-]+)">.*?<figcaption>(.*?)</figcaption>', text, re.S)}


def test_de_duplication_notes_fold_into_one_line():
    """`report reports/ -f html` over 19 runs of one sweep opened on 18 notes, one per pair of runs holding the
    same cases: one line says how many, the notes themselves in a <details> under it; other notes stay lines."""
    rows = [dict(r, _source=f"runs/202611{i + 1:02d}T000000Z-bench-aaaa{i:02d}/bench.json")
            for i in range(19) for r in bench4096()]
    view = merge_view([], rows, device="NVIDIA H100 80GB HBM3")
    c = compare(view)
    c.notes.append("an unrelated note")
    dedup = [n for n in c.notes if n.endswith("is used for them")]
    assert len(dedup) == 18
    text = backend_table_view.to_html(c, view)
    head = text[:text.index('<h2 id="plots">')]
    top = re.sub(r"<details.*?</details>", "", head, flags=re.S)
    assert top.count('<li class="note">') == 2  # the folded line and the unrelated note
    assert "an unrelated note" in top
    (details,) = re.findall(r'<details class="notes"><summary>(.*?)</summary>(.*?)</details>', head, re.S)
    assert details[0].startswith("18 de-duplication notes")
    assert details[1].count("<li>") == 18 and all(html.escape(n) in details[1] for n in dedup)
    # a single such note is not folded
    one = compare(merge_view([], rows[:2 * len(bench4096())], device="NVIDIA H100 80GB HBM3"))
    one_text = backend_table_view.to_html(one, merge_view([], rows[:2 * len(bench4096())]))
    assert "<details" not in one_text and "is used for them</li>" in one_text


def test_captions_say_what_the_chart_is_against():
    """One sequence length draws bars per backend: the caption says so, not 'against sequence length'."""
    view = merge_view([], bench4096(), device="NVIDIA H100 80GB HBM3")
    caps = _captions(backend_table_view.to_html(compare(view), view))
    assert caps["time"] == "Time per iteration per backend at sequence length 4096"
    assert caps["tflops"] == "TFLOP/s per backend at sequence length 4096"
    assert caps["speedup"].startswith("Speedup over the baseline per backend at sequence length 4096")
    assert not any("against sequence length" in c for c in caps.values())
    rows = []
    for r in bench4096():
        for s in (2048, 4096):
            rows.append(dict(r, seqlen_q=s, seqlen_kv=s))
    view = merge_view([], rows, device="NVIDIA H100 80GB HBM3")
    caps = _captions(backend_table_view.to_html(compare(view), view))
    assert caps["time"] == "Time per iteration against sequence length"
    assert caps["memory"] == "Peak memory against sequence length"


def test_fixture_captions_name_the_axes(fixture_page):
    text, _, _ = fixture_page
    caps = _captions(text)
    assert caps["time"].endswith("per backend at sequence length 2048")
    assert caps["roofline"].startswith("Roofline (ncu): kernels' TFLOP/s against arithmetic intensity")
    assert caps["breakdown"] == "The baseline's time by kernel class per sequence length and pass"


def test_a_report_page_of_summaries_fits_a_laptop_screen(data_file):
    """A report with a program's summary beside the comparison: every table scrolls in its own box, and the
    long NVTX paths of the kernel and range tables wrap instead of widening the page."""
    from profctl.render import report_view

    s = readers.read(data_file("profctl_bwd_nvtx.sqlite"), by_range=True)
    view = merge_view([], bench4096(), device="NVIDIA H100 80GB HBM3")
    parts = report_view.ReportParts(table=compare(view), view=view, summaries=[("a program", s)])
    text = report_view.to_html(parts)
    css = re.search(r"<style>(.*?)</style>", text, re.S)[1]
    assert "max-width:1280px" in css and ".tbl{max-width:100%;overflow-x:auto" in css
    assert text.count('<div class="tbl"><table') == text.count("<table") >= 3
    paths = re.findall(r'<td class="([^"]*)">(profctl@[^<]+)</td>', text)
    assert paths and all("w" in cls.split() for cls, _ in paths)
