"""The simulator's accounting: what a run holds and spends.

The run's state (devices, tensors, their bytes, the host memory they would have used),
the operation trace with each operation's estimated time, the host-memory bound, and the
collective communication counts. No torch patching and no rule tables: every other part
of the simulator builds on this one. Internal: the public API is :mod:`torchplace.sim`.
"""
