"""A convolution with a small CPU input and CUDA weights: the slow kernel's device check.

GPU: for one 3x8x8 image and a 3x3 kernel, ``_select_conv_backend`` picks the CPU's slow
kernel (MKLDNN only pays off for larger work), whose call dispatches to CUDA on the CUDA
weight and fails its device check: "Expected all tensors to be on the same device, but got
weight is on cuda:0, different from other tensors on cpu (when checking argument in method
wrapper_CUDA___slow_conv2d_forward)". Seen on an H200 with torch 2.11 (the run of
2026-11, see the conformance README); mismatch_conv_batch is the MKLDNN variant.
Source: aten/src/ATen/native/Convolution.cpp (_select_conv_backend, ConvParams::use_mkldnn:
batch 1 with kernels of 3x3 or smaller and under 20480 input elements take Slow2d;
_convolution_nogroup_backend calls at::thnn_conv2d -> _slow_conv2d_forward).
"""

import torch

conv = torch.nn.Conv2d(3, 8, 3).cuda()
out = conv(torch.randn(1, 3, 8, 8))

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Expected all tensors to be on the same device, but got weight is on cuda:0, different from other tensors on cpu \(when checking argument in method wrapper_CUDA___slow_conv2d_forward\)",
        "line": "out = conv(",
    },
}
