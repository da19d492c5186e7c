"""A convolution with CPU input and CUDA weights raises the type-mismatch error.

GPU: "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the
same or input should be a MKLDNN tensor and weight is a dense tensor".
Source: aten/src/ATen/native/Convolution.cpp check_input_same_type_as_parameters (the MKLDNN
variant on the CPU path); one of the most quoted PyTorch errors (pytorch forums, SO).
"""

import torch

conv = torch.nn.Conv2d(3, 8, 3).cuda()
out = conv(torch.randn(1, 3, 8, 8))

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Input type \(torch\.FloatTensor\) and weight type \(torch\.cuda\.FloatTensor\) should be the same or input should be a MKLDNN tensor and weight is a dense tensor",
        "line": 12,
    },
}
