"""The simulated CUDA itself: torch's CUDA bindings emulated, and the torch modes.

``torch._C``'s CUDA bindings (devices, properties, streams, events, graphs, the caching
allocator's statistics, pinned memory, settings) emulated so that torch's own
``torch.cuda`` Python runs unchanged; the dispatch modes that place, check, price and
compute every aten operation; Python processes the script starts; and
:func:`torchplace.sim.simulate`, which puts them together. Built on the accounting, rules
and reporting parts. Internal: the public API is :mod:`torchplace.sim`.
"""
