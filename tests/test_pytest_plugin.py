"""The pytest plugin (``--sim-gpu``, ``@pytest.mark.sim_gpu``, the ``sim`` fixture), tested
with pytest's own ``pytester``: each test writes a small test suite and runs pytest on it.

Runs are in-process (``runpytest``) where possible: torch and the simulator are imported
here first, so pytester's restore of ``sys.modules`` after each run keeps them. The checks
that need a fresh interpreter (what importing the plugin costs, and the whole flow of a
real ``pytest --sim-gpu`` command) run pytest in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
import torch
import torch._dynamo  # imported by simulate(): loaded here, it survives pytester runs

import torchplace.sim.emulation._simulate
from torchplace import pytest_plugin
from torchplace.sim import VALUES

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _no_simulation_left_behind() -> Iterator[None]:
    """Every in-process run must leave this process as it found it: torch.cuda restored."""
    yield
    assert not torchplace.sim.emulation._simulate._active
    assert torch.cuda.is_available.__module__ == "torch.cuda"


def _suite(pytester: pytest.Pytester, source: str, conftest: str | None = None) -> None:
    pytester.makepyfile(test_suite=textwrap.dedent(source))
    if conftest is not None:
        pytester.makeconftest(textwrap.dedent(conftest))


# ----------------------------------------------------------------------- --sim-gpu


def test_sim_gpu_runs_the_session_on_simulated_gpus_from_before_conftest_import(
    pytester: pytest.Pytester,
) -> None:
    _suite(
        pytester,
        """
        import pytest, torch
        import conftest

        WEIGHT = torch.ones(3, device="cuda")  # made at import, on the simulated GPU
        DEVICES = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]

        @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
        def test_gpu_only():
            assert conftest.AVAILABLE_AT_IMPORT
            assert torch.cuda.get_device_name(1) == "NVIDIA A100-SXM4-40GB"
            x = torch.arange(6.0, device="cuda:1").reshape(2, 3)
            assert x.is_cuda and x.device == torch.device("cuda", 1)
            assert (x @ x.T).tolist() == [[5.0, 14.0], [14.0, 50.0]]
            assert WEIGHT.sum().item() == 3.0 and WEIGHT.device.type == "cuda"

        @pytest.mark.parametrize("device", DEVICES)
        def test_every_device(device):
            assert torch.ones(2, device=device).sum().item() == 2.0
        """,
        conftest="""
        import torch
        AVAILABLE_AT_IMPORT = torch.cuda.is_available()
        """,
    )
    result = pytester.runpytest("--sim-gpu", "A100 40GB", "--sim-gpus", "2", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "torchplace sim: 2 × simulated NVIDIA A100 SXM4 40GB (real values) (--sim-gpu)",
            "*test_every_device?cuda:1? PASSED*",
        ]
    )


def test_without_the_option_gpu_tests_skip_as_before(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import pytest, torch

        @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
        def test_gpu_only():
            pass
        """,
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    assert "torchplace sim" not in result.stdout.str()


def test_an_ordinal_beyond_sim_gpus_fails_with_cudas_error_at_the_users_line(
    pytester: pytest.Pytester,
) -> None:
    _suite(
        pytester,
        """
        import torch

        def test_third_gpu():
            a = torch.zeros(2, device="cuda:1")
            b = torch.zeros(2, device="cuda:2")
        """,
    )
    result = pytester.runpytest("--sim-gpu", "H100", "--sim-gpus", "2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '>       b = torch.zeros(2, device="cuda:2")',
            "E       torch.AcceleratorError: CUDA error: invalid device ordinal",
            "test_suite.py:5: AcceleratorError",
            "*- torchplace sim -*",
            "2 × simulated NVIDIA H100 SXM5 80GB (real values)",
        ]
    )
    # the simulator's own frames are not shown: the error is CUDA's, raised at the user's line
    assert "_modes.py" not in result.stdout.str()


def test_full_trace_keeps_the_simulators_frames(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import torch

        def test_mismatch():
            torch.ones(2, device="cuda") + torch.ones(2)
        """,
    )
    result = pytester.runpytest("--sim-gpu", "H100", "--full-trace")
    result.assert_outcomes(failed=1)
    assert "_modes.py" in result.stdout.str()  # the frames the default trace leaves out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sim-gpu", "H99"], "*argument --sim-gpu: Unknown GPU 'H99'. The catalog has: t4,*"),
        (["--sim-gpu", "H100", "--sim-gpus", "0"], "*argument --sim-gpus: expected a whole*"),
        (["--sim-gpu", "H100", "--sim-gpus", "two"], "*got 'two'*"),
        (
            ["--sim-gpu", "H100", "--sim-values", "fake"],
            "*argument --sim-values: invalid choice: 'fake' (choose from *real*placeholder*auto*",
        ),
        (["--sim-gpus", "2"], "*--sim-gpus applies to the simulated GPUs of --sim-gpu, which*"),
        (["--sim-values", "real"], "*--sim-values applies to*add --sim-gpu NAME*"),
    ],
)
def test_bad_options_are_usage_errors_not_tracebacks(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    _suite(pytester, "def test_nothing():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_placeholder_values_read_back_as_zeros(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import torch

        def test_shapes_only():
            x = torch.ones(1000, 1000, device="cuda")
            assert x.shape == (1000, 1000) and x.sum().item() == 0.0
        """,
    )
    pytester.runpytest("--sim-gpu", "T4", "--sim-values", "placeholder").assert_outcomes(passed=1)


def test_auto_values_go_on_with_placeholders_where_the_host_runs_short(
    pytester: pytest.Pytester,
) -> None:
    """A 37 GiB outer product fits an H100, not this host (nor a 64 MiB limit): with
    values="auto" the test goes on with placeholders; with "real" it fails with
    HostMemoryError, before the host allocates anything (else pytest would have died)."""
    _suite(
        pytester,
        """
        import pytest, torch
        from torchplace.sim import HostMemoryError

        def outer():
            a = torch.randn(100_000, 1, device="cuda")
            return a @ a.T

        @pytest.mark.sim_gpu("H100", values="auto", host_memory_limit="64MiB")
        def test_auto(sim):
            assert sim.values == "real" and torch.ones(3, device="cuda").sum().item() == 3.0
            assert outer().sum().item() == 0.0
            assert sim.values == "placeholder" and "placeholder values since" in repr(sim)

        @pytest.mark.sim_gpu("H100", host_memory_limit="64MiB")
        def test_real():
            with pytest.raises(HostMemoryError, match="aten.mm would take 37.25 GiB"):
                outer()
        """,
    )
    pytester.runpytest().assert_outcomes(passed=2)


# ----------------------------------------------------------------------- the marker


def test_marker_simulates_one_test_and_its_fixtures(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import pytest, torch

        @pytest.fixture
        def model():
            return torch.nn.Linear(4, 2).cuda()

        @pytest.mark.sim_gpu("A100 40GB", gpus=2)
        def test_marked(model):
            assert torch.cuda.device_count() == 2
            assert torch.cuda.get_device_properties(0).total_memory < 41 * 2**30
            y = model(torch.ones(3, 4, device="cuda"))
            assert y.device == torch.device("cuda", 0) and y.shape == (3, 2)
            expected = torch.ones(3, 4) @ model.weight.detach().cpu().T + model.bias.detach().cpu()
            assert torch.equal(y.detach().cpu(), expected)

        def test_not_marked():
            assert not torch.cuda.is_available()

        @pytest.mark.sim_gpu
        def test_default_gpu():
            assert torch.cuda.get_device_name() == "NVIDIA H100 80GB HBM3"

        @pytest.mark.sim_gpu(gpu="T4", values="placeholder")
        def test_placeholder():
            assert torch.ones(2, device="cuda").sum().item() == 0.0
        """,
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=4)


def test_marker_on_a_machine_default_set_in_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nsim_gpu_default = T4\n")
    _suite(
        pytester,
        """
        import pytest, torch

        @pytest.mark.sim_gpu
        def test_default_gpu():
            assert torch.cuda.get_device_name() == "Tesla T4"
        """,
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_marker_out_of_memory_fails_at_the_users_line(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import pytest, torch

        @pytest.mark.sim_gpu("T4", memory="1GiB")
        def test_too_big():
            keep = torch.empty(256, 2**20, device="cuda")  # 1 GiB of float32
        """,
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            ">       keep = torch.empty(256, 2**20, device=*",
            "E       torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1024.00 MiB.*",
            "test_suite.py:5: OutOfMemoryError",
            "*- torchplace sim -*",
            "cuda:0: allocated 0 B, peak 0 B, reserved 0 B of 1.00 GiB",
            "out of memory on cuda:0 at *test_suite.py:5",
        ]
    )


def test_marker_device_mismatch_fails_with_pytorchs_error(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import pytest, torch

        @pytest.mark.sim_gpu("H100")
        def test_mixed():
            model = torch.nn.Linear(4, 4).cuda()
            model(torch.ones(1, 4))
        """,
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["E       RuntimeError: Expected all tensors to be on the same device*"]
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('"H99"', "*@pytest.mark.sim_gpu: Unknown GPU 'H99'. The catalog has*"),
        ('"H100", cores=4', "*unknown argument(s) cores; it takes a GPU name and gpus, values,*"),
        ('"H100", "T4"', "*takes one GPU name, got 2 positional arguments*"),
        ("80", "*the GPU is a catalog name such as 'H100', got 80*"),
        ('"H100", gpus=0', "*gpus must be a whole number >= 1, got 0*"),
        ('values="fake"', "*values must be one of 'real', 'placeholder', 'auto', got 'fake'*"),
        ('memory="lots"', "*sim_gpu: *lots*"),
    ],
)
def test_bad_marker_arguments_fail_that_test_with_what_is_wrong(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    _suite(
        pytester,
        f"""
        import pytest

        @pytest.mark.sim_gpu({marker})
        def test_bad():
            pass

        def test_fine():
            pass
        """,
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([message])


def test_marker_under_sim_gpu_runs_in_the_session_or_skips_saying_why(
    pytester: pytest.Pytester,
) -> None:
    _suite(
        pytester,
        """
        import pytest, torch

        @pytest.mark.sim_gpu("H100", gpus=2)
        def test_same():
            assert torch.cuda.device_count() == 2

        @pytest.mark.sim_gpu(gpus=2)
        def test_count_only():
            pass

        @pytest.mark.sim_gpu("A100 40GB")
        def test_other_gpu():
            pass
        """,
    )
    result = pytester.runpytest("--sim-gpu", "H100", "--sim-gpus", "2", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED * @pytest.mark.sim_gpu asks for GPU NVIDIA A100 SXM4 40GB, but this "
            "session runs on 2 × simulated NVIDIA H100 SXM5 80GB (real values) (--sim-gpu) and "
            "simulations do not nest: run it without --sim-gpu*"
        ]
    )


# ----------------------------------------------------------------------- the fixture


def test_fixture_reads_memory_transfers_and_syncs_live(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import pytest, torch

        @pytest.fixture
        def weights():
            return torch.zeros(2**20, device="cuda")  # 4 MiB, set up before the test body

        @pytest.mark.sim_gpu("A100 80GB", gpus=2)
        def test_memory_is_a_unit_test(sim, weights):
            assert sim.count == 2 and sim.gpu.key == "a100-sxm-80gb" and sim.values == "real"
            assert sim.session is False
            assert sim.allocated_bytes(0) == 4 * 2**20
            x = torch.ones(2**20, device="cuda:1")  # 4 MiB on the second device
            del x
            assert sim.allocated_bytes("cuda:1") == 0
            assert sim.peak_allocated_bytes(torch.device("cuda", 1)) == 4 * 2**20
            assert sim.reserved_bytes(1) == sim.peak_reserved_bytes(1) == 20 * 2**20
            assert sim.capacity_bytes(0) == torch.cuda.get_device_properties(0).total_memory
            assert sim.transfers("h2d").count == 0
            assert weights.sum().item() == 0.0
            assert sim.transfers("d2h").count == 1
            (sync,) = sim.syncs()
            assert (sync.kind, sync.line, sync.count) == ("item", 19, 1)
            sim.reset()
            assert sim.syncs() == [] and sim.transfers("d2h").count == 0
            assert sim.peak_allocated_bytes(1) == 0 and sim.peak_allocated_bytes(0) == 4 * 2**20

        def test_asking_for_the_fixture_simulates_the_default_gpu(sim):
            assert torch.cuda.is_available() and sim.gpu.key == "h100-sxm-80gb"
            assert "1 × simulated NVIDIA H100 SXM5 80GB (real values)" in repr(sim)

        def test_bad_device_and_kind(sim):
            with pytest.raises(ValueError, match=r"'cuda:3' is not a simulated GPU: this test runs on 1"):
                sim.allocated_bytes("cuda:3")
            with pytest.raises(ValueError, match=r"'cpu' is not a simulated GPU"):
                sim.allocated_bytes("cpu")
            with pytest.raises(ValueError, match=r"not a device: 'gpu0'"):
                sim.allocated_bytes("gpu0")
            with pytest.raises(ValueError, match=r"kind must be one of 'h2d', 'd2h', 'd2d'"):
                sim.transfers("up")
        """,
    )
    pytester.runpytest().assert_outcomes(passed=3)


def test_fixture_under_sim_gpu_counts_from_each_tests_start(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import torch

        KEEP = []

        def test_first(sim):
            KEEP.append(torch.zeros(2**20, device="cuda"))  # stays live: 4 MiB
            KEEP[0].cpu()
            assert sim.session and sim.transfers("d2h").count == 1

        def test_second(sim):
            assert sim.allocated_bytes() == 4 * 2**20  # the first test's tensor
            assert sim.transfers("d2h").count == 0 and sim.syncs() == []
            assert sim.peak_allocated_bytes() == 4 * 2**20
        """,
    )
    pytester.runpytest("--sim-gpu", "L4", "-p", "no:randomly").assert_outcomes(passed=2)


def test_report_is_filled_when_the_tests_simulation_ends(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        """
        import torch

        REPORTS = []

        def test_uses_memory(sim):
            REPORTS.append(sim.report)
            torch.ones(2**20, device="cuda").cpu()
            assert sim.report.devices == []  # filled at the end of the simulation

        def test_after():
            (report,) = REPORTS
            assert report.device(0).peak_allocated_bytes == 4 * 2**20
            assert report.transfers["d2h"] == {"count": 1, "bytes": 4 * 2**20}
        """,
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


# ----------------------------------------------------------------------- packaging


def test_the_plugin_is_registered_and_importing_it_does_not_import_torch() -> None:
    code = (
        "import sys, torchplace.pytest_plugin; from importlib.metadata import entry_points; "
        "eps = [e.value for e in entry_points(group='pytest11')]; "
        "assert 'torchplace.pytest_plugin' in eps, eps; "
        "assert 'torch' not in sys.modules, 'the plugin imported torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_value_modes_match_the_simulator() -> None:
    assert pytest_plugin._VALUES == VALUES


def test_a_real_pytest_command_with_sim_gpu(pytester: pytest.Pytester) -> None:
    """The whole flow in a fresh interpreter, as CI runs it."""
    _suite(
        pytester,
        """
        import pytest, torch

        pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")

        def test_train_step():
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).cuda()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            x, y = torch.randn(64, 8).cuda(), torch.randn(64, 1).cuda()
            losses = []
            for _ in range(20):
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            assert losses[-1] < losses[0]
            assert all(p.is_cuda for p in model.parameters())
        """,
    )
    result = pytester.runpytest_subprocess("--sim-gpu", "H100", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_simulating_tells_a_simulated_gpu_from_a_real_one() -> None:
    from torchplace.sim import simulate

    assert not pytest_plugin.simulating()
    with simulate("T4"):
        assert pytest_plugin.simulating() and torch.cuda.is_available()
    assert not pytest_plugin.simulating()


def test_files_a_test_saves_go_where_the_test_says(pytester: pytest.Pytester) -> None:
    """Tests that save to tmp_path and list it (captum's influence tests do) pass."""
    _suite(
        pytester,
        """
        import torch

        def test_saves_checkpoints(tmp_path):
            model = torch.nn.Linear(2, 2).cuda()
            for epoch in range(2):
                torch.save(model.state_dict(), tmp_path / f"epoch-{epoch}.pt")
            assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-0.pt", "epoch-1.pt"]
            back = torch.load(tmp_path / "epoch-1.pt", map_location="cpu")
            assert back["weight"].shape == (2, 2)
        """,
    )
    result = pytester.runpytest("--sim-gpu", "H100", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest("--sim-gpu", "H100", "--sim-values", "placeholder")
    result.assert_outcomes(passed=1)
