"""torch.amp.custom_fwd(cast_inputs=float32) runs forward with fp32 CUDA inputs and autocast off."""

import torch

# torch/amp/autocast_mode.py custom_fwd: with cast_inputs, when autocast is enabled for
# device_type the forward runs inside autocast(enabled=False) on inputs cast by _cast (floating
# tensors of that device type, not float64); custom_bwd runs backward with the same state.
seen = {}


class Square(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, x):
        seen["dtype"] = x.dtype
        seen["autocast"] = torch.is_autocast_enabled("cuda")
        ctx.save_for_backward(x)
        return torch.mm(x, x)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g @ x.t() + x.t() @ g


x = torch.randn(3, 3, device="cuda", dtype=torch.float16, requires_grad=True)
with torch.autocast("cuda"):
    y = Square.apply(x)
assert seen == {"dtype": torch.float32, "autocast": False}, seen
assert y.dtype == torch.float32
y.sum().backward()
assert x.grad is not None and x.grad.dtype == torch.float16
print("ok")
