# near miss: a Triton kernel file is GPU code by design
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass


def add(x, y):
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    add_kernel[grid](x, y, x.numel(), BLOCK=1024)
    return out


if __name__ == "__main__":
    a = torch.randn(4096, device="cuda")
    print(add(a, a))
