"""A run as a script that reruns its case exactly (``profctl show RUN --repro``): the command line as it was typed,
in the directory it ran in, under the environment variables that change what runs; the versions, the GPU and the
clocks the run saw written down as comments, and checked against where the script runs (a mismatch is a
warning: the colleague decides whether it matters)."""

from __future__ import annotations

import datetime as _dt
import shlex
from typing import Any

#: options that spread a run over workers: the rerun does the same, or runs serially without them
_EXECUTOR_FLAGS = ("--workers", "--gpus", "--cluster")


def _q(x: Any) -> str:
    return shlex.quote(str(x))


def _facts(m: dict[str, Any], ab: dict[str, Any] | None) -> list[str]:
    """Comment lines: what ran, where, on what, and the clocks seen."""
    env = m.get("environment") or {}
    dev = m.get("device") or {}
    git = m.get("git") or {}
    clocks = m.get("clocks") or {}
    gpu = dev.get("name") or dev.get("nvml_name") or env.get("gpu") or "cpu"
    gpu = "none (a CPU run)" if gpu == "cpu" else gpu
    out = [f"run {m.get('run_id')} ({m.get('kind')}, {m.get('status')}), started {m.get('started')} on "
           f"{m.get('host')}",
           f"profctl {m.get('profctl') or '?'}; Python {m.get('python') or '?'}; PyTorch "
           f"{dev.get('torch') or env.get('torch') or '?'} (CUDA {dev.get('cuda') or env.get('cuda') or '-'})",
           f"GPU: {gpu}" + (f", {dev['sm_count']} SMs" if dev.get("sm_count") else "")
           + (f"; driver {env.get('driver') or dev.get('driver')}" if env.get("driver") or dev.get("driver") else ""),
           f"platform: {env.get('platform') or '?'}"]
    for k, name in (("flash_attn", "flash-attn"), ("fa4", "FA4"), ("cutlass_dsl", "CUTLASS DSL"),
                    ("triton", "Triton")):
        if env.get(k):
            out.append(f"{name} {env[k]}")
    if git.get("commit"):
        out.append(f"code under test: git {git['commit']}{' (with local changes)' if git.get('dirty') else ''} "
                   f"in {git.get('repo')}")
    out += _clock_lines(env, clocks, ab)
    return out


def _clock_lines(env: dict[str, Any], clocks: dict[str, Any], ab: dict[str, Any] | None) -> list[str]:
    out = []
    if env.get("sm_clock_mhz_max"):
        out.append(f"SM clock at the start: {env.get('sm_clock_mhz_now')} of {env['sm_clock_mhz_max']} MHz"
                   + (f", reasons {', '.join(env.get('clock_reasons_at_start') or []) or 'none'}"))
    if clocks.get("sm_clock_mhz_min"):
        out.append(f"SM clock seen while measuring: {clocks['sm_clock_mhz_min']}..{clocks.get('sm_clock_mhz_max')} "
                   f"MHz; throttle reasons: {', '.join(clocks.get('throttle_reasons') or []) or 'none'}")
    mhz = [float(c["sm_clock_mhz_median"]) for case in (ab or {}).get("cases") or []
           for r in case.get("rounds") or [] for c in (r.get("a_clocks"), r.get("b_clocks"))
           if isinstance(c, dict) and c.get("sm_clock_mhz_median")]
    if mhz:
        out.append(f"SM clock over the A/B rounds: {min(mhz):.0f}..{max(mhz):.0f} MHz")
    if not out:
        out.append("clocks: not sampled (no NVML, or a CPU run)")
    return out


def script(m: dict[str, Any], *, ab: dict[str, Any] | None = None, now: _dt.datetime | None = None) -> str:
    """The bash script that reruns the run whose manifest is `m` (`ab`: its ab.json, for the clocks of its
    rounds)."""
    cmd = [str(x) for x in m.get("command") or []]
    if not cmd:
        raise ValueError("the manifest records no command line")
    args = cmd[1:] if cmd[0] in ("profctl",) or cmd[0].endswith("/profctl") else cmd
    env = dict(m.get("env") or ((m.get("program") or {}).get("environment") or {}))
    when = (now or _dt.datetime.now(_dt.timezone.utc)).isoformat(timespec="seconds")
    lines = ["#!/usr/bin/env bash", f"# Rerun profctl run {m.get('run_id')} exactly: written by profctl show "
             f"--repro on {when}.", "#"]
    lines += [f"# {x}" for x in _facts(m, ab)]
    lines += ["#", "# PROFCTL (default: profctl on PATH, else $PYTHON -m profctl) and PYTHON (default: python3)",
              "# say which profctl and Python to use, e.g. PROFCTL='python3 -m profctl'.", "set -u",
              'PYTHON=${PYTHON:-python3}',
              "warn() { echo \"repro: warning: $*\" >&2; }"]
    lines += _find_profctl()
    lines += _checks(m)
    lines.append("")
    lines.append("# the environment variables of interest, as the run had them")
    lines += [f"export {k}={_q(v)}" for k, v in sorted(env.items())] or ["# (none were set)"]
    cwd = m.get("cwd")
    if cwd:
        lines += ["", f'cd {_q(cwd)} 2>/dev/null || warn {_q(cwd)}" is not here: running in $PWD"']
    if any(a in _EXECUTOR_FLAGS or a.split("=")[0] in _EXECUTOR_FLAGS for a in args):
        lines += ["", "# The run was spread over workers (--workers/--gpus/--cluster); this line does the same. A case",
                  "# does not depend on where it ran: to rerun it on one GPU, drop those options."]
    lines += ["", f"exec $PROFCTL {' '.join(_q(a) for a in args)}", ""]
    return "\n".join(lines)


def _find_profctl() -> list[str]:
    """Bash that settles which profctl runs before anything else: the one on PATH (an executable file: bash's
    `exec` of a name not on PATH may find a profctl/ *folder* in the current directory and fail with "Is a
    directory"), else the one $PYTHON imports; neither is one line saying what to do, exit 127."""
    return ['if [ -z "${PROFCTL:-}" ]; then',
            '  if type -P profctl >/dev/null; then',
            '    PROFCTL=profctl',
            '  elif "$PYTHON" -c "import profctl.cli" 2>/dev/null; then',
            '    PROFCTL="$PYTHON -m profctl"',
            '    warn "profctl is not on PATH: running $PROFCTL"',
            '  else',
            '    echo "repro: error: profctl is not on PATH and $PYTHON cannot import it: activate the environment" \\',
            '      "profctl is installed in (e.g. source .venv/bin/activate), or set PROFCTL=\'/path/to/python -m" \\',
            '      "profctl\'" >&2',
            '    exit 127',
            '  fi',
            'fi']


def _checks(m: dict[str, Any]) -> list[str]:
    """Bash that warns when profctl's, PyTorch's version or the GPU differ from the run's."""
    env = m.get("environment") or {}
    dev = m.get("device") or {}
    want_torch = dev.get("torch") or env.get("torch")
    gpu = dev.get("nvml_name") or env.get("gpu") or (dev.get("name") if dev.get("name") != "cpu" else None)
    out = ["", "# what ran then against what is here: a difference is a warning (it may change the times)"]
    out += ['have_torch=$("$PYTHON" - torch 2>/dev/null <<\'PY\'', "import importlib.metadata as m, sys",
            "for p in sys.argv[1:]:", "    try:", "        print(m.version(p))", "    except Exception:",
            "        print('none')", "PY", ")",
            "# the version of the profctl that will run, as it says itself",
            'have_profctl=$($PROFCTL --version 2>/dev/null | awk \'{print $2}\')']
    if m.get("profctl"):
        out.append(f'[ "${{have_profctl:-none}}" = {_q(m["profctl"])} ] || warn "profctl ${{have_profctl:-none}} '
                   f'here, {m["profctl"]} in the run"')
    if want_torch:
        out.append(f'[ "${{have_torch:-none}}" = {_q(want_torch)} ] || warn "PyTorch ${{have_torch:-none}} here, '
                   f'{want_torch} in the run"')
    if gpu:
        out.append('gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)')
        out.append(f'[ "$gpu" = {_q(gpu)} ] || warn "GPU ${{gpu:-none}} here, {gpu} in the run"')
    return out
