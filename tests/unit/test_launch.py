"""workloads/kernels/launch.py on the CPU: the key keeps apart what Triton specializes apart, a descriptor copied from
its template equals one Triton builds and checks, a tensor Triton refuses is still refused, and under the
interpreter every launch goes through Triton's own path (nothing kept). The direct launches themselves run on the GPU
(tests/gpu/test_launch_gpu.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from profctl.workloads.kernels import launch

ROOT = Path(__file__).resolve().parents[2]
tensor_descriptor = pytest.importorskip("triton.tools.tensor_descriptor")
TensorDescriptor = tensor_descriptor.TensorDescriptor


def test_the_key_separates_what_triton_specializes_on() -> None:
    kind = launch._kind
    assert kind(16) != kind(17) and kind(1) != kind(2)  # ints by value: == 1, multiple of 16, width
    assert kind(True) != kind(1) and kind(False) != kind(0)  # a bool is not the int 1 in a signature
    assert kind(0.5) == kind(2.0)  # floats are fp32 arguments, never specialized by value
    buf = torch.empty(64, dtype=torch.bfloat16)
    assert kind(buf) == (torch.bfloat16, True)
    assert kind(buf[1:]) == (torch.bfloat16, False)  # 2 bytes in: not 16-byte aligned
    assert kind(buf.float()) != kind(buf)
    x = torch.empty(1, 2, 64, 32, dtype=torch.bfloat16)
    d64 = TensorDescriptor.from_tensor(x, [1, 1, 64, 32])
    d32 = TensorDescriptor.from_tensor(x, [1, 1, 32, 32])
    assert kind(d64) != kind(d32)
    assert kind(TensorDescriptor.from_tensor(x.clone(), [1, 1, 64, 32])) == kind(d64)  # the base's address is not
    assert kind("ieee") != kind("tf32") and kind(None) is None


def test_a_copied_descriptor_equals_the_one_triton_builds() -> None:
    launch.clear()
    a = torch.empty(2, 4, 128, 64, dtype=torch.bfloat16)
    b = torch.empty(1, 8, 256, 64, dtype=torch.bfloat16)
    first = launch.descriptor(TensorDescriptor, a, list(a.shape), list(a.stride()), [1, 1, 64, 64])
    second = launch.descriptor(TensorDescriptor, b, list(b.shape), list(b.stride()), [1, 1, 64, 64])
    assert first == TensorDescriptor(a, list(a.shape), list(a.stride()), [1, 1, 64, 64])
    assert second == TensorDescriptor(b, list(b.shape), list(b.stride()), [1, 1, 64, 64])
    assert second.base is b and second.block_shape == [1, 1, 64, 64]


def test_a_tensor_triton_refuses_is_still_refused() -> None:
    """The copy is taken only after the checks that depend on the tensor; anything else goes to Triton, which
    refuses it as before."""
    launch.clear()
    ok = torch.empty(1, 2, 64, 64, dtype=torch.bfloat16)
    launch.descriptor(TensorDescriptor, ok, list(ok.shape), list(ok.stride()), [1, 1, 64, 64])  # the template
    flat = torch.empty(1 + 2 * 64 * 64, dtype=torch.bfloat16)
    shifted = flat[1:].view(1, 2, 64, 64)  # 2 bytes off 16-byte alignment
    with pytest.raises(AssertionError, match="16-byte aligned"):
        launch.descriptor(TensorDescriptor, shifted, list(shifted.shape), list(shifted.stride()), [1, 1, 64, 64])
    odd = torch.empty(1, 2, 64, 72, dtype=torch.bfloat16)[..., :64]  # rows 144 bytes apart: fine; 64 + 8 columns
    launch.descriptor(TensorDescriptor, odd, list(odd.shape), list(odd.stride()), [1, 1, 64, 64])
    bad = torch.empty(1, 2, 64, 68, dtype=torch.bfloat16)[..., :64]  # rows 136 bytes apart: not a multiple of 16
    with pytest.raises(AssertionError, match="16-byte aligned"):
        launch.descriptor(TensorDescriptor, bad, list(bad.shape), list(bad.stride()), [1, 1, 64, 64])
    with pytest.raises(AssertionError, match="positive"):
        e = torch.empty(1, 2, 0, 64, dtype=torch.bfloat16)
        launch.descriptor(TensorDescriptor, e, list(e.shape), [8192, 4096, 64, 1], [1, 1, 64, 64])


def test_the_interpreter_keeps_nothing() -> None:
    """Under TRITON_INTERPRET=1 (a subprocess: the flag is read at import) two calls of the same kind both take
    Triton's path: the interpreter has no compiled kernel to keep."""
    code = ("import torch\n"
            "from profctl.workloads.kernels import launch, triton_attention as ta\n"
            "q = torch.randn(1, 2, 32, 16)\n"
            "for _ in range(2):\n    ta.attention(q, q, q, is_causal=True)\n"
            "print('KEPT', launch.kept(), launch.COUNTS['direct'], launch.COUNTS['triton'])\n")
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    kept, direct, via_triton = (int(x) for x in r.stdout.split("KEPT")[1].split())
    assert (kept, direct) == (0, 0) and via_triton == 2
