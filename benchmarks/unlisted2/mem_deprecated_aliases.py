"""memory_cached / max_memory_cached / reset_max_memory_allocated still work, with
FutureWarnings.
"""

import warnings

import torch

# torch/cuda/memory.py: memory_cached and max_memory_cached are deprecated with FutureWarning
# "`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`" (and the same
# for max_); reset_max_memory_allocated warns "torch.cuda.reset_max_memory_allocated now calls
# torch.cuda.reset_peak_memory_stats, which resets /all/ peak memory stats." (FutureWarning).
x = torch.empty(1024, device="cuda")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert torch.cuda.memory_cached() == torch.cuda.memory_reserved() == 2 * 1024**2
    assert torch.cuda.max_memory_cached() == torch.cuda.max_memory_reserved()
    torch.cuda.reset_max_memory_allocated()
texts = [(w.category, str(w.message)) for w in caught]
assert (
    FutureWarning,
    "`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`",
) in texts, texts
assert any(c is FutureWarning and "max_memory_cached` has been renamed" in m for c, m in texts), (
    texts
)
assert any(
    c is FutureWarning and m.startswith("torch.cuda.reset_max_memory_allocated now calls")
    for c, m in texts
), texts
print("ok")
