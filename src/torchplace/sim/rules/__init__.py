"""What CUDA does, as tables and pure functions, for the simulator.

Which aten operators have a CUDA kernel and for which dtypes (tables generated from a CUDA
build of torch by tools/gen_cuda_ops.py), device and dtype checks as ATen makes them,
autocast policies read from torch's dispatcher, the attention kernel's eligibility
(sdp_utils), deterministic-algorithm alerts, sync debug mode and CUDA's index limits.
Built on :mod:`torchplace.sim.accounting` only. Internal: the public API is
:mod:`torchplace.sim`.
"""
