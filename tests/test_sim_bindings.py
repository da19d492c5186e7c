"""The emulated ``torch._C`` CUDA bindings (sim/emulation/_bindings*.py): torch's own Python runs on them.

Each test states what torch does and where (the file of torch's source that says so); the
simulator must do the same through torch's unchanged Python.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from torchplace.sim import simulate

MiB = 1024**2


def test_lazy_init_follows_torch() -> None:
    # torch/cuda/__init__.py: is_initialized() is _initialized, set by _lazy_init() at the
    # first CUDA use; is_available() and device_count() do not initialize
    with simulate("H100", gpus=2):
        assert not torch.cuda.is_initialized()
        assert torch.cuda.is_available() and torch.cuda.device_count() == 2
        assert not torch.cuda.is_initialized()
        torch.ones(1, device="cuda")
        assert torch.cuda.is_initialized()
    with simulate("H100"):
        assert not torch.cuda.is_initialized()  # a new simulation starts uninitialized
        torch.cuda.current_stream()
        assert torch.cuda.is_initialized()


def test_device_properties_are_torchs() -> None:
    with simulate("H100", gpus=2):
        props = torch.cuda.get_device_properties(1)
        # one object per device (torch/csrc/cuda/Module.cpp returns the cached cudaDeviceProp)
        assert props is torch.cuda.get_device_properties("cuda:1")
        assert props != torch.cuda.get_device_properties(0)
        # torch/csrc/cuda/Module.cpp: the repr lists name, major, minor, total_memory, ...
        text = repr(props)
        assert text.startswith("_CudaDeviceProperties(name='NVIDIA H100")
        assert "major=9, minor=0" in text and "simulated" not in text
        # uuid: a _CUuuid, bytes of 16 and a str like CUDA's 8-4-4-4-12 hex
        uuid = props.uuid
        assert not isinstance(uuid, str) and len(uuid.bytes) == 16
        assert [len(p) for p in str(uuid).split("-")] == [8, 4, 4, 4, 12]
        with pytest.raises(AttributeError):
            props.major = 8  # type: ignore[misc]  # read-only, as the pybind properties
        # torch/cuda/__init__.py get_device_properties: its own check and message
        with pytest.raises(AssertionError, match="Invalid device id"):
            torch.cuda.get_device_properties(2)


def test_streams_events_and_devices() -> None:
    with simulate("H100", gpus=2):
        s = torch.cuda.Stream(1)
        assert s.device == torch.device("cuda", 1) and isinstance(s, torch.Stream)
        # torch/cuda/streams.py Stream.__enter__ makes the stream's device current
        with s:
            assert torch.cuda.current_device() == 1
            assert torch.cuda.current_stream() == s
        assert torch.cuda.current_device() == 0
        assert torch.cuda.current_stream(1) != s
        # __cuda_stream__ (the CUDA stream protocol): (version, handle)
        _version, handle = s.__cuda_stream__()
        assert handle == s.cuda_stream and handle != 0
        _lowest, hi = torch.cuda.Stream.priority_range()
        assert torch.cuda.Stream(priority=hi).priority == hi
        # generic torch.Stream / torch.Event with device "cuda"
        g = torch.Stream("cuda")
        assert g.device == torch.device("cuda", 0) and g.device_type == 1  # c10 DeviceType::CUDA
        e = torch.Event("cuda", enable_timing=True)
        e.record()
        assert e.query()
        # torch/cuda/streams.py Event.__repr__
        ev = torch.cuda.Event()
        assert repr(ev) == "<torch.cuda.Event uninitialized>"
        ev.record()
        assert repr(ev).startswith("<torch.cuda.Event 0x")


def test_event_elapsed_time_errors_are_torchs() -> None:
    # c10/cuda/CUDAEvent.h elapsed_time: both events need enable_timing and must have been
    # recorded; torch 2.13 raises them as ValueError
    with simulate("H100"):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with pytest.raises((ValueError, RuntimeError), match="recorded"):
            a.elapsed_time(b)
        untimed = torch.cuda.Event()
        a.record()
        untimed.record()
        with pytest.raises((ValueError, RuntimeError), match="enable_timing"):
            a.elapsed_time(untimed)
        b.record()
        b.synchronize()
        assert a.elapsed_time(b) >= 0.0


def test_sleep_keeps_the_stream_busy_until_synchronized() -> None:
    # torch.cuda._sleep spins the GPU for a number of cycles; the host does not wait
    with simulate("H100") as report:
        torch.cuda._sleep(10**9)
        assert not torch.cuda.current_stream().query()
        torch.cuda.synchronize()
        assert torch.cuda.current_stream().query()
    assert report.devices[0].estimated_total_seconds > 0.1  # 10**9 cycles at ~2 GHz


def test_a_stream_waiting_on_another_device_completes_after_it() -> None:
    # cudaStreamWaitEvent across devices: device 1's stream, and an event recorded on it
    # after the wait, are done only once device 0's work is (each device has its own clock)
    with simulate("H100", gpus=2):
        with torch.cuda.device(1):
            torch.cuda._sleep(10**9)  # device 1 busy
            busy = torch.cuda.current_stream()
        waiting = torch.cuda.Stream(device=0)
        waiting.wait_stream(busy)  # wait_stream, not wait_event: the same dependency
        after = waiting.record_event()
        assert not after.query() and not waiting.query()
        torch.cuda.synchronize(0)  # device 0's synchronize waits for what it depends on
        assert after.query() and waiting.query() and busy.query()


def test_backward_on_another_devices_stream_keeps_the_current_device() -> None:
    # engine.cpp's OptionalStreamGuard: a node's backward runs on its forward's stream (of
    # device 1 here) and gives back the device and stream that were current
    with simulate("H100", gpus=2):
        side = torch.cuda.Stream(device=1)
        with torch.cuda.stream(side):
            x = torch.ones(4, device="cuda:1", requires_grad=True)
            y = (x * 2).sum()
        assert torch.cuda.current_device() == 0
        y.backward()
        assert torch.cuda.current_device() == 0
        assert torch.cuda.current_stream(1) == torch.cuda.default_stream(1)
        assert x.grad is not None and x.grad.device == torch.device("cuda", 1)


def test_blocking_copies_wait_for_the_stream_and_non_blocking_ones_pin() -> None:
    # Copy.cu: without non_blocking, memcpy_and_sync waits for the stream; _to_copy puts a
    # non-blocking copy to the CPU in pinned memory (TensorConversions.cpp, pin_out)
    with simulate("H100"):
        dst = torch.empty(1000, device="cuda")
        torch.cuda._sleep(10**9)
        dst.copy_(torch.ones(1000))  # copy_, not .to(): a blocking host-to-device copy
        assert torch.cuda.current_stream().query()
        torch.cuda._sleep(10**9)
        out = dst.to("cpu", torch.float64, non_blocking=True)
        assert not torch.cuda.current_stream().query()
        assert out.is_pinned() and out.dtype == torch.float64
        assert not dst.to("cpu", torch.float64).is_pinned()


def test_elapsed_time_of_events_on_two_devices() -> None:
    # CUDAEvent.h elapsed_time: its checks pass, then cudaEventElapsedTime refuses events
    # of two devices (invalid resource handle), whichever device is current
    with simulate("H100", gpus=2):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(torch.cuda.current_stream(0))
        end.record(torch.cuda.current_stream(1))
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        with torch.cuda.device(1), pytest.raises(RuntimeError, match="invalid resource handle"):
            end.elapsed_time(start)


def test_allocator_bindings_and_stats() -> None:
    with simulate("H100"):
        ptr = torch.cuda.caching_allocator_alloc(MiB)  # _cuda_cudaCachingAllocator_raw_alloc
        assert torch.cuda.memory_allocated() == MiB
        torch.cuda.caching_allocator_delete(ptr)
        assert torch.cuda.memory_allocated() == 0
        with pytest.raises(RuntimeError, match="invalid device pointer"):
            torch.cuda.caching_allocator_delete(ptr)
        assert torch.cuda.memory_stats()["allocation.all.allocated"] >= 1
        # c10 resetAccumulatedStats: the allocated/freed counters go back to zero
        torch.cuda.reset_accumulated_memory_stats()
        stats = torch.cuda.memory_stats()
        assert stats["allocation.all.allocated"] == 0 and stats["allocation.all.freed"] == 0
        # pinned host memory: the host caching allocator (c10/core/CachingHostAllocator.h)
        # rounds a request up to a power of two and caches freed blocks until emptied
        t = torch.empty(3000, pin_memory=True)
        assert t.is_pinned()
        host = torch.cuda.host_memory_stats()
        assert host["allocated_bytes.current"] == 16384 and host["allocations.current"] == 1
        del t
        host = torch.cuda.host_memory_stats()
        assert host["active_requests.current"] == 0 and host["allocations.current"] == 1
        torch._C._host_emptyCache()
        assert torch.cuda.host_memory_stats()["allocations.current"] == 0


def test_memory_history_context_flags_are_honoured() -> None:
    # torch/cuda/memory.py _record_memory_history(context=...): "state" keeps the frames of
    # live blocks only, None none at all; "all" also the frames of frees
    with simulate("H100"):
        torch.cuda.memory._record_memory_history(context=None)
        a = torch.empty(MiB, device="cuda")
        snap = torch.cuda.memory._snapshot()
        blocks = [
            b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"
        ]
        assert blocks and all(not b.get("frames") for b in blocks)
        torch.cuda.memory._record_memory_history(context="all")
        b = torch.empty(MiB, device="cuda")
        del b
        snap = torch.cuda.memory._snapshot()
        frees = [e for e in snap["device_traces"][0] if e["action"] == "free_requested"]
        assert frees and frees[-1]["frames"]
        torch.cuda.memory._record_memory_history(enabled=None)
        del a


def _capture_and_replay(replays: int) -> tuple[float, int]:
    with simulate("H100") as report:
        s = torch.cuda.Stream()
        x = torch.ones(1000, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s):
            g.capture_begin()
            y = x * 2 + 1
            g.capture_end()
        torch.cuda.current_stream().wait_stream(s)
        assert x.sum().item() == 1000  # the capture wrote nothing a GPU would not
        x.fill_(3)
        for _ in range(replays):
            g.replay()
        if replays:
            assert y.sum().item() == 7000
        # the captured outputs live in the graph's private pool
        pools = {tuple(seg["segment_pool_id"]) for seg in torch.cuda.memory_snapshot()}
        assert g.pool() in pools
    return report.devices[0].estimated_total_seconds, report.devices[0].estimate["ops"]


def test_cuda_graph_capture_and_replay() -> None:
    # capture records (prices nothing); each replay runs and prices the captured kernels
    none, once, thrice = (_capture_and_replay(n) for n in (0, 1, 3))
    assert thrice[1] - once[1] == 4  # two more replays of two kernels (mul, add)
    assert none[0] < once[0] < thrice[0]


def test_a_host_tensors_value_is_read_freely_during_a_capture() -> None:
    """A kernel's host code reading a host tensor (fused Adam's CPU ``lr`` and betas:
    ``lr.item()`` in the CUDA kernel's wrapper) is no CUDA work: the capture goes on; the
    same read of a GPU tensor is refused."""
    with simulate("H100", values="real"):
        p = [torch.randn(5, 5, device="cuda", requires_grad=True)]
        betas = (torch.tensor(0.9), torch.tensor(0.99))
        opt = torch.optim.Adam(p, fused=True, capturable=True, lr=torch.tensor(1e-3), betas=betas)
        p[0].grad = torch.ones_like(p[0])
        opt.step()  # the state, made before the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            opt.step()
            assert torch.tensor([2.0]).item() == 2.0
        before = p[0].detach().clone()
        g.replay()
        assert not torch.equal(before, p[0])
        with (
            pytest.raises(RuntimeError, match="previous error during capture"),
            torch.cuda.graph(torch.cuda.CUDAGraph()),
        ):
            p[0].sum().item()


def test_record_stream_keeps_a_block_until_the_streams_work_is_done() -> None:
    """PyTorch's test_record_stream: a tensor made on a side stream, used on the default
    stream (record_stream) while it sleeps, is not reused on the side stream before the
    default stream's work is done, and is after a synchronize."""
    with simulate("H100", values="real"):
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            tmp = torch.ones(4, device="cuda")
        ptr = tmp.data_ptr()
        torch.cuda.current_stream().wait_stream(side)
        tmp.record_stream(torch.cuda.current_stream())
        torch.cuda._sleep(10**8)  # the default stream is busy for 50 ms
        out = tmp * 2
        del tmp
        assert torch.cuda.memory_allocated() == 512  # `out`: the free left the stats
        with torch.cuda.stream(side):
            assert torch.empty(4, device="cuda").data_ptr() != ptr
        torch.cuda.current_stream().synchronize()
        with torch.cuda.stream(side):
            assert torch.empty(4, device="cuda").data_ptr() == ptr
        # recorded on its own stream: nothing to wait for (recordStream)
        with torch.cuda.stream(side):
            own = torch.ones(4, device="cuda")
            own.record_stream(side)
            ptr = own.data_ptr()
            del own
            assert torch.empty(4, device="cuda").data_ptr() == ptr
        assert out.tolist() == [2.0] * 4


def test_cuda_graph_refusals_are_cudas() -> None:
    with simulate("H100"):
        g = torch.cuda.CUDAGraph()
        # aten/src/ATen/cuda/CUDAGraph.cpp capture_begin
        with pytest.raises(RuntimeError, match="non-default stream"):
            g.capture_begin()
        x = torch.ones(4, device="cuda")
        s = torch.cuda.Stream()
        # a host synchronization inside a capture: CUDA refuses it and invalidates the
        # capture, so capture_end (torch.cuda.graph's exit) fails too
        with (
            pytest.raises(RuntimeError, match="previous error during capture") as info,
            torch.cuda.stream(s),
            torch.cuda.graph(torch.cuda.CUDAGraph(), stream=s),
        ):
            x.sum().item()
        assert "operation not permitted when stream is capturing" in str(info.value.__context__)
        assert not torch.cuda.is_current_stream_capturing()
        x.sum().item()  # the capture is over: the process can go on
        # CUDAGraph.cpp raw_cuda_graph: its own checks, then the simulator's refusal
        kept = torch.cuda.CUDAGraph(keep_graph=True)
        with pytest.raises(RuntimeError, match="until capture_end"):
            kept.raw_cuda_graph()
        with pytest.raises(RuntimeError, match="keep_graph=true"):
            torch.cuda.CUDAGraph().raw_cuda_graph()
        # an empty capture warns as CUDAGraph.cpp's capture_end does
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                pass
        assert any("The CUDA Graph is empty" in str(w.message) for w in caught)
        # CUDAGeneratorImpl::set_current_seed during a capture
        with (
            pytest.raises(RuntimeError, match="set_current_seed"),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")  # the graph is empty too
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                torch.cuda.manual_seed(torch.cuda.initial_seed() + 1)


def test_graphs_sharing_a_pool_read_each_others_memory() -> None:
    # torch.cuda.graph's docs: graphs sharing a pool must be replayed in capture order; g2
    # reuses the memory of c (freed after g1's capture) for f, so replaying g2 before g1
    # hands g1 f's values (test_cuda.py test_graph_three_successive)
    with simulate("H100"):
        a = torch.ones(100, device="cuda")
        g0, g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            g0.capture_begin()
            b = a.clone()
            c = b + 1
            d = b + 2
            g0.capture_end()
            g1.capture_begin(g0.pool())
            e = c + 3
            del c
            g1.capture_end()
            g2.capture_begin(g0.pool())
            f = d + 4
            g2.capture_end()
        torch.cuda.current_stream().wait_stream(s)
        for g in (g0, g1, g2):
            g.replay()
        assert (e.sum().item(), f.sum().item()) == (500, 700)
        for g in (g0, g2, g1):
            g.replay()
        assert (e.sum().item(), f.sum().item()) == (1000, 700)


def test_accelerator_graph_is_a_cuda_graph() -> None:
    with simulate("H100"):
        s = torch.Stream("cuda")
        g = torch.accelerator.Graph()
        x = torch.zeros(10, device="cuda")
        with s, g:
            a = torch.full((10,), 1.0, device="cuda")  # captured: replays write it again
            b = a + x
            assert s.is_capturing()
        x.fill_(5)
        g.replay()
        assert b.sum().item() == 60


def test_driver_jiterator_and_library_settings() -> None:
    with simulate("H100"):
        cudart = torch.cuda.cudart()
        assert cudart.cudaGetErrorString(cudart.cudaError.success) == "no error"
        _free, total = torch.cuda.mem_get_info()
        assert total == torch.cuda.get_device_properties(0).total_memory
        from torch.cuda.jiterator import _create_jit_fn

        fn = _create_jit_fn("template <typename T> T f(T x) { return x; }")
        with pytest.raises(RuntimeError, match=r"not simulated: torch\.cuda\.jiterator"):
            fn(torch.ones(2, device="cuda"))
        # CublasHandlePool.cpp: 32 MiB on Hopper; the override wins; reset goes back
        assert torch.backends.cuda.cublas_workspace_size() == 32 * MiB
        assert torch.backends.cuda.cublas_workspace_size(4 * MiB) == 4 * MiB
        torch.ones(8, 8, device="cuda") @ torch.ones(8, 8, device="cuda")
        torch._C._cuda_resetCublasWorkspaceSize()
        assert torch.backends.cuda.cublas_workspace_size() == 32 * MiB
        # aten/src/ATen/Context.h benchmark_limit_cudnn (torch.backends.cudnn reads it
        # through torch._C only where cuDNN was available when it was imported)
        assert torch._C._cuda_get_cudnn_benchmark_limit() == 10
        assert not torch.cuda.tunable.is_enabled()
        with pytest.raises(RuntimeError, match="not simulated: TunableOp"):
            torch.cuda.tunable.enable(True)


def test_a_jiterator_function_made_before_the_simulation_is_refused_plainly() -> None:
    """torch/cuda/jiterator.py notes is_available() when a function is made; one made
    before the simulation (OpInfo's, at import) reaches the binding as on a GPU machine."""
    from torch.cuda.jiterator import _create_jit_fn, _create_multi_output_jit_fn

    one = _create_jit_fn("template <typename T> T f(T x) { return x; }")
    two = _create_multi_output_jit_fn(
        "template <typename T> void g(T x, T& a, T& b) { a = x; b = x; }", num_outputs=2
    )
    with simulate("H100"):
        for fn in (one, two):
            with pytest.raises(RuntimeError, match=r"^not simulated: torch\.cuda\.jiterator"):
                fn(torch.ones(2, device="cuda"))
        with pytest.raises(AssertionError, match="up to 8 tensor inputs"):  # torch's own check
            one(*[torch.ones(1, device="cuda")] * 9)
    with pytest.raises(AssertionError, match="only supported on CUDA"):  # after it: torch's
        one(torch.ones(2))


def test_cublas_workspace_config_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8:16:8")
    with simulate("A100"):
        assert torch.backends.cuda.cublas_workspace_size() == 4096 * 1024 * 8 + 16 * 1024 * 8


def test_out_of_memory_observers_are_called() -> None:
    seen: list[tuple[int, ...]] = []
    with simulate("T4"):
        torch._C._cuda_attach_out_of_memory_observer(lambda *args: seen.append(args))
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(64 * 1024**3, dtype=torch.uint8, device="cuda")
    assert len(seen) == 1 and seen[0][0] == 0 and seen[0][1] >= 64 * 1024**3


_TO_CALLS = [  # every Tensor.to overload (torch/_tensor_docs.py), device "D"
    (("D",), {}),
    (("D", torch.float16), {}),
    (("D", torch.float16, False, True), {}),  # copy positional
    ((torch.float16, False, True), {}),
    (("D", torch.float64, True), {"copy": True}),
    ((), {"device": "D", "dtype": torch.float16, "non_blocking": True, "copy": True}),
    ((), {"dtype": torch.float16, "copy": True}),
    (("T",), {}),  # another tensor: its device and dtype
    (("T", False, True), {}),
]


@pytest.mark.parametrize("args, kwargs", _TO_CALLS)
def test_tensor_to_accepts_every_overload(args: tuple, kwargs: dict) -> None:
    def bind(device: str, a: object) -> object:
        if a == "D":
            return torch.device(device)
        if a == "T":
            return torch.ones(1, dtype=torch.float16, device=device)
        return a

    def call(device: str) -> tuple[torch.Tensor, bool]:
        x = torch.ones(3, device=device)
        y = x.to(
            *[bind(device, a) for a in args], **{k: bind(device, v) for k, v in kwargs.items()}
        )
        return y, y is x

    host, host_same = call("cpu")  # torch's own overloads, on the host
    with simulate("H100"):
        y, same = call("cuda")
        assert y.device.type == "cuda" and y.dtype == host.dtype and same == host_same


def test_legacy_and_new_tf32_flags_together() -> None:
    # torch/backends/cuda/__init__.py: the legacy allow_tf32 and the fp32_precision API
    # are two views of one setting; setting both must leave every op working
    saved = torch.backends.cuda.matmul.fp32_precision
    try:
        with simulate("H100"):
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cuda.matmul.fp32_precision = "ieee"
            x = torch.ones(4, 4, device="cuda")
            assert (x @ x).sum().item() == 64
            torch.backends.cuda.matmul.allow_tf32 = False
            assert (x + 1).sum().item() == 32
    finally:
        torch.backends.cuda.matmul.fp32_precision = saved


def test_pinned_memory_is_reused_by_address() -> None:
    # c10/core/CachingHostAllocator.h: a freed pinned block is cached and handed out again,
    # unless a non-blocking copy still uses it (test_cuda.py test_caching_pinned_memory)
    with simulate("H100"):
        t = torch.FloatTensor([1]).pin_memory()
        ptr = t.data_ptr()
        del t
        t = torch.FloatTensor([1]).pin_memory()
        assert t.data_ptr() == ptr and t.is_pinned()
        gpu = torch.zeros(1, device="cuda")
        torch.cuda._sleep(10**9)  # the copy below waits on the stream
        gpu.copy_(t, non_blocking=True)
        del t
        t = torch.FloatTensor([2]).pin_memory()
        assert t.data_ptr() != ptr
        assert gpu.item() == 1


@pytest.mark.parametrize("values", ["real", "placeholder"])
def test_a_non_blocking_copy_to_the_host_lands_in_pinned_memory(values: str) -> None:
    # aten/src/ATen/native/TensorConversions.cpp _to_copy: pin_out = non_blocking && self
    # on the GPU && a strided host result; a blocking copy's result is pageable
    with simulate("H100", gpus=2, values=values):
        g = torch.arange(6.0, device="cuda:1", requires_grad=True)
        h = g.to("cpu", torch.float64, non_blocking=True)
        assert h.is_pinned() and h.dtype == torch.float64 and h.grad_fn is not None
        h.sum().backward()
        assert g.grad is not None and g.grad.device == torch.device("cuda", 1)
        in_use = torch.cuda.host_memory_stats()["allocated_bytes.current"]
        assert in_use >= h.nbytes
        assert not g.detach().to("cpu").is_pinned() and not g.detach().cpu().is_pinned()
        if values == "real":
            assert h.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
            assert g.grad.tolist() == [1.0] * 6


def test_copy_of_unpinned_memory_during_capture_is_refused() -> None:
    # aten/src/ATen/native/cuda/Copy.cu: a capture cannot copy from pageable host memory
    with simulate("H100"):
        y = torch.zeros(4, device="cuda")
        pinned = torch.ones(4).pin_memory()
        g = torch.cuda.CUDAGraph()
        with (
            pytest.raises(RuntimeError, match="unless the CPU tensor is pinned"),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")  # the refused copy leaves the graph empty
            with torch.cuda.graph(g):
                y.copy_(torch.ones(4), non_blocking=True)
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            y.copy_(pinned, non_blocking=True)


def test_32_bit_index_limit_of_a_cuda_kernel() -> None:
    # aten/src/ATen/native/cuda/AveragePool2d.cu: safe_downcast<int32_t>(output.numel())
    with simulate("H100", values="placeholder"):
        x = torch.empty(1, 1, 1, 2**31, dtype=torch.float16, device="cuda")
        with pytest.raises(RuntimeError, match="integer out of range"):
            torch.nn.functional.avg_pool2d(x, kernel_size=1)
        x = torch.empty(1, 1, 1, 2**31 - 1, dtype=torch.float16, device="cuda")
        assert torch.nn.functional.avg_pool2d(x, kernel_size=1).numel() == 2**31 - 1


def test_backward_runs_on_the_forward_stream() -> None:
    # "Stream semantics of backward passes" (docs/source/notes/cuda.rst): each backward op
    # runs on the stream its forward op ran on; custom Functions too
    seen: list[object] = []

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
            seen.append(torch.cuda.current_stream())
            return grad * 2

    with simulate("H100"):
        side = torch.cuda.Stream()
        x = torch.ones(4, device="cuda", requires_grad=True)
        with torch.cuda.stream(side):
            y = Double.apply(x)
            z = y.exp()
        z.grad_fn.register_prehook(lambda grads: seen.append(torch.cuda.current_stream()))
        z.sum().backward()  # called on the default stream
        assert seen == [side, side]
        assert torch.cuda.current_stream() == torch.cuda.default_stream()


def test_more_than_an_exabyte_is_refused_first() -> None:
    # c10/cuda/CUDACachingAllocator.cpp allocate(): size < one_exa_bytes, before any pool
    with simulate("H100"), pytest.raises(torch.OutOfMemoryError, match="more than 1EB"):
        torch.empty(2**61, dtype=torch.int8, device="cuda")


def test_the_caching_allocator_checks_its_own_device_arguments() -> None:
    """Memory stats open no device guard: c10's assertValidDevice answers a bad ordinal
    ("Invalid device argument N: did you call init?"), not CUDA's "invalid device ordinal";
    and a CUDA storage is always shared (StorageMethods.cpp THPStorage_isShared)."""
    with simulate("H100", gpus=2):
        x = torch.ones(256, device="cuda:1")
        assert torch.cuda.memory_allocated(1) == 1024 and torch.cuda.memory_allocated(0) == 0
        for call in (
            lambda: torch.cuda.memory_allocated(5),
            lambda: torch.cuda.max_memory_reserved(2),
            lambda: torch.cuda.reset_peak_memory_stats(3),
            lambda: torch.cuda.reset_accumulated_memory_stats(7),
        ):
            with pytest.raises(
                RuntimeError, match=r"Invalid device argument \d: did you call init"
            ):
                call()
        assert x.is_shared() and x[1:].untyped_storage().is_shared()
        assert not torch.ones(2).is_shared()
