"""Recipes: every built-in validates, selects metrics per compute capability, and a broken file is a one-line
error that points at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from profctl import recipes
from profctl.errors import RecipeError, UsageError

REQUIRED = {"tensor-core", "dram", "sm-throughput", "occupancy", "speed-of-light", "memory", "full"}
AMPERE, HOPPER = (8, 0), (9, 0)


def test_builtin_recipes_all_validate() -> None:
    all_ = {r.name: r for r in recipes.load_all()}
    assert set(all_) >= REQUIRED
    for name, r in all_.items():
        assert Path(r.path).stem == name
        assert r.summary and (r.metrics or r.sections or r.set_name)
        for m in r.metrics:
            assert m.label and m.means and m.read and m.line > 0


def test_tensor_core_metrics_per_compute_capability() -> None:
    r = recipes.get("tensor-core")
    amp, hop = set(r.metric_names(AMPERE)), set(r.metric_names(HOPPER))
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" in amp & hop
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" in hop - amp
    assert "sm__inst_executed_pipe_tensor_op_gmma.sum" in hop - amp
    assert r.threshold("tensor_low_pct") == 40 and r.threshold("bound_pct") == 60


def test_other_recipes_collect_what_they_say() -> None:
    assert recipes.get("full").set_name == "full"
    assert recipes.get("speed-of-light").sections_for(HOPPER) == ["SpeedOfLight"]
    assert "dram__bytes_read.sum" in recipes.get("dram").metric_names(HOPPER)
    mem = recipes.get("memory").metric_names(HOPPER)
    assert {"l1tex__t_bytes.sum", "lts__t_bytes.sum", "dram__bytes_write.sum"} <= set(mem)
    occ = recipes.get("occupancy").metric_names(AMPERE)
    assert {"sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct"} <= set(occ)


def test_cc_ranges() -> None:
    c = recipes.parse_cc(">=8.0,<9.0")
    assert c.matches((8, 0)) and c.matches((8, 9)) and not c.matches((9, 0)) and not c.matches((7, 5))
    assert recipes.parse_cc("9.0").matches((9, 0)) and not recipes.parse_cc("9.0").matches((9, 1))
    assert recipes.parse_cc("<=8.6").matches((8, 6)) and not recipes.parse_cc("<=8.6").matches((8, 7))
    with pytest.raises(ValueError):
        recipes.parse_cc("hopper")
    with pytest.raises(ValueError):
        recipes.parse_cc(">=9.0,<8.0")


def test_hint_conditions() -> None:
    conds = recipes.parse_when("a__b.sum < 0.8 * c__d.pct and e__f >= 60")
    vals = {"a__b.sum": 10.0, "c__d.pct": 20.0, "e__f": 61.0}
    assert all(c.evaluate(vals) for c in conds)
    assert conds[0].evaluate({"a__b.sum": 17.0, "c__d.pct": 20.0}) is False
    assert conds[1].evaluate({}) is None  # a missing metric never fires a hint
    with pytest.raises(ValueError):
        recipes.parse_when("a__b + 1 > 2")
    with pytest.raises(ValueError):
        recipes.parse_when("1 < 2")


GOOD = """\
name: mine
summary: my own recipe
metrics:
  - name: gpu__time_duration.sum
    label: Duration
    means: time
    read: lower is better
hints:
  - when: gpu__time_duration.sum > 1000000
    say: slow
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(text)
    return p


def test_user_recipe_by_path_and_by_search_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _write(tmp_path, GOOD)
    r = recipes.get(str(p))
    assert r.name == "mine" and r.metric_names(None) == ["gpu__time_duration.sum"] and r.hints[0].line == 9
    monkeypatch.setenv(recipes.ENV_PATH, str(tmp_path))
    assert recipes.resolve("r") == p
    with pytest.raises(UsageError, match="unknown recipe 'nope'"):
        recipes.resolve("nope")
    with pytest.raises(UsageError, match="does not exist"):
        recipes.resolve(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize(("text", "line", "message"), [
    (GOOD.replace("    label: Duration\n", "    label: Duration\n    colour: red\n"), 6, "unknown metric key 'colour'"),
    (GOOD.replace("gpu__time_duration.sum\n    label", "gpu_time_duration\n    label"), 4, "not an ncu metric name"),
    (GOOD.replace("    read: lower is better\n", ""), 4, "missing 'read'"),
    (GOOD + "thresholds:\n  bound_pcnt: 50\n", 12, "unknown threshold 'bound_pcnt'"),
    (GOOD + "thresholds:\n  bound_pct: high\n", 12, "must be a non-negative number"),
    (GOOD + "thresholds:\n  bound_pct: 0.6\n", 12, "bound_pct is in percent, 1 to 100 (60 for 60 %), not 0.6"),
    (GOOD + "thresholds:\n  occupancy_ratio: 80\n", 12, "occupancy_ratio is a fraction"),
    (GOOD.replace("gpu__time_duration.sum > 1000000", "sm__other.sum > 3"), 9, "does not collect"),
    (GOOD.replace("gpu__time_duration.sum > 1000000", "gpu__time_duration.sum >> 3"), 9, "neither a number"),
    (GOOD + "set: everything\n", 11, "set must be one of"),
    (GOOD.replace("    label: Duration\n", "    label: Duration\n    cc: hopper\n"), 6, "MAJOR.MINOR"),
    (GOOD + "name: again\n", 11, "duplicate key 'name'"),
    (GOOD.replace("  - name: gpu__time_duration.sum\n", "  - name: [gpu__time_duration.sum\n"), 5, "invalid YAML"),
    ("- just\n- a list\n", 1, "a recipe is a mapping"),
    ("name: Bad Name\nsummary: s\nset: full\n", 1, "must be lower-case"),
    ("name: empty\nsummary: s\n", 1, "collects nothing"),
])
def test_invalid_recipes_point_at_the_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(RecipeError) as e:
        recipes.load(p)
    msg = e.value.one_line()
    assert msg.startswith(f"{p}:{line}:"), msg
    assert message in msg and "\n" not in msg


def test_line_of_metric_for_ncu_errors() -> None:
    r = recipes.get("tensor-core")
    ln = r.line_of("sm__inst_executed_pipe_tensor_op_gmma.sum")
    assert ln is not None
    text = Path(r.path).read_text().splitlines()
    assert "sm__inst_executed_pipe_tensor_op_gmma.sum" in text[ln - 1]
    assert r.where("sm__inst_executed_pipe_tensor_op_gmma.sum") == f"{r.path}:{ln}"


def test_builtin_recipes_are_found_through_the_installed_package(tmp_path) -> None:
    """From any working directory, through importlib.resources on profctl.builtin_recipes (the recipes/ folder
    shipped as a package), not by walking up from a source file."""
    import importlib.resources
    import subprocess
    import sys

    code = "from profctl import recipes; print(recipes.builtin_dir()); print(' '.join(sorted(recipes.available())))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                         timeout=60).stdout.splitlines()
    assert out[0] == str(importlib.resources.files("profctl.builtin_recipes"))
    assert "tensor-core" in out[1].split() and "dram" in out[1].split()
