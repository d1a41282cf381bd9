"""profctl's own attention kernels in Triton: the kernels themselves (triton_kernels: FlashAttention-2 forward and
backward, the FP8 forward, their Proton scopes) and their host side (triton_attention: launch configurations and
the autograd wrapper called like SDPA, the ``--backend triton`` function)."""
