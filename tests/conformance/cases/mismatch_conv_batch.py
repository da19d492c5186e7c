"""A convolution with a batch of CPU images and CUDA weights raises the type-mismatch error.

GPU: "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the
same or input should be a MKLDNN tensor and weight is a dense tensor" — for a batch of 16
images ``_select_conv_backend`` picks MKLDNN for the CPU input, which checks the types first.
Source: aten/src/ATen/native/Convolution.cpp (ConvParams::use_mkldnn: a float CPU input with
batch > 1; check_input_same_type_as_parameters, the MKLDNN variant); one of the most quoted
PyTorch errors (pytorch forums, Stack Overflow).
"""

import torch

conv = torch.nn.Conv2d(3, 8, 3).cuda()
out = conv(torch.randn(16, 3, 32, 32))

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Input type \(torch\.FloatTensor\) and weight type \(torch\.cuda\.FloatTensor\) should be the same or input should be a MKLDNN tensor and weight is a dense tensor",
        "line": "out = conv(",
    },
}
