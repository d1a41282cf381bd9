"""profctl's NVTX scheme: one private domain and range names a profiler filter can select on.

Push/pop ranges in domain ``profctl``, nested three deep on the thread that runs the workload:

    <backend>[<shape_key>]                 one per case, e.g. sdpa-flash[b1,sq4096,skv4096,h32,kv32,d128,bf16,full,bhsd]
      warmup | measure                     the warm-up iterations, then the measured ones
        <backend>.fwd | <backend>.bwd      one per iteration and pass

Backward kernels run on autograd's worker thread, outside the pushing thread's stack. The workload therefore
wraps the attention call in two identity autograd functions whose backward methods push the same three-level
stack on the autograd thread just before the attention's backward runs and pop it right after, so the
backward kernels sit inside ``<backend>[...]/measure/<backend>.bwd/`` on that thread too.

The whole measured region of each case is also bracketed by cudaProfilerStart/Stop, for capture ranges.
This module has no dependencies so profctl can build filters without importing torch.
"""

from __future__ import annotations

import re

DOMAIN = "profctl"
WARMUP = "warmup"
MEASURE = "measure"
SETUP = "setup"


def case_range(backend: str, shape_key: str) -> str:
    return f"{backend}[{shape_key}]"


def pass_range(backend: str, pass_: str) -> str:
    """The leaf range of one iteration; ``pass_`` is 'fwd' or 'bwd'."""
    return f"{backend}.{pass_}"


def ncu_filter(backend: str, pass_: str, shape_key: str | None = None, phase: str = MEASURE) -> str:
    """An ncu ``--nvtx-include`` expression for the kernels of one backend's pass in the measured region.

    Push/pop expressions need the trailing '/'; without it ncu silently matches nothing.
    """
    case = re.escape(case_range(backend, shape_key)) if shape_key else re.escape(backend) + r"\[[^/]*\]"
    return f"regex:{DOMAIN}@{case}/{phase}/{re.escape(pass_range(backend, pass_))}/"


def nsys_capture_name() -> str:
    """nsys capture ranges use cudaProfilerStart/Stop; this names the NVTX alternative (--nvtx-capture)."""
    return f"{MEASURE}@{DOMAIN}"
