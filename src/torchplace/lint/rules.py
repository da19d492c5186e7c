"""The rule catalogue: codes, messages, which rules ``--fix`` can apply, and the simulator link.

Codes are grouped by what goes wrong:

- ``TPL0xx`` the file itself (it does not parse);
- ``TPL1xx`` host-device synchronisation: the CPU waits for the GPU every step;
- ``TPL2xx`` placement: tensors on the wrong device, devices hard-coded;
- ``TPL3xx`` memory and checkpoints;
- ``TPL4xx`` APIs that tie code to one GPU setup or are deprecated.

The simulator (``torchplace sim``) reports host-device synchronisations and device errors
at a file and line; :func:`rules_for_sim_event` names the rules that cover such an event,
so a report can point at the rule (and its fix) whose finding sits on the same line.

Examples:
    >>> RULES["TPL101"].name
    'sync-in-training-loop'
    >>> rules_for_sim_event("item")
    ('TPL101',)
    >>> resolve_codes(["TPL1"], ["TPL104"])[:3]
    ('TPL101', 'TPL102', 'TPL103')
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "RULES",
    "SIM_EVENT_RULES",
    "Rule",
    "UnknownRuleError",
    "check_codes",
    "default_codes",
    "resolve_codes",
    "rules_for_sim_event",
]


@dataclass(frozen=True)
class Rule:
    """One lint rule.

    Attributes:
        code: ``TPLnnn``.
        name: a short kebab-case name.
        title: what the rule finds, in a few words.
        message: the one-line finding message (why it matters on a GPU, and the fix).
        hint: the fix, as an imperative sentence.
        fixable: whether ``--fix`` resolves (some of) its findings without changing
            what the program computes.
        sim_events: the simulator event kinds this rule's pattern produces at run time.
        default: whether the rule runs without ``--select``. A rule whose findings were
            not worth acting on at least 80% of the time on code it was not tuned on is
            opt-in: ``--select`` must name its full code (or ``ALL``).
    """

    code: str
    name: str
    title: str
    message: str
    hint: str
    fixable: bool = False
    sim_events: tuple[str, ...] = ()
    default: bool = True

    @property
    def doc(self) -> str:
        """Where the rule is documented: its section of docs/lint.md."""
        return f"docs/lint.md#{self.code.lower()}-{self.name}"


_RULE_LIST = (
    Rule(
        "TPL001",
        "syntax-error",
        "file does not parse",
        "cannot parse this file: {detail}",
        "fix the syntax error (nothing else in this file was checked)",
    ),
    Rule(
        "TPL101",
        "sync-in-training-loop",
        "host read every training step",
        "`{call}` in the training loop waits for the GPU every step (a host-device sync "
        "that stalls the pipeline); keep values on the device and read them every N steps",
        "accumulate on the device (`total += loss.detach()`) and call .item() when logging",
        sim_events=("item", "tolist", "to cpu"),
    ),
    Rule(
        "TPL102",
        "tensor-formatted-in-loop",
        "tensor printed or formatted every step",
        "formatting the tensor `{name}` as text every step copies it to the host and waits "
        "for the GPU; log `{name}.item()` every N steps instead",
        "print or log the value every N steps, not every step",
        sim_events=("print",),
    ),
    Rule(
        "TPL103",
        "tensor-truth-value-in-loop",
        "tensor used as a condition every step",
        "using a tensor as a condition (`{expr}`) reads it on the host: a GPU sync every "
        "step; check it every N steps or keep the logic on the device (torch.where)",
        "test the condition every N steps, or compute it on the device",
        sim_events=("bool",),
    ),
    Rule(
        "TPL104",
        "empty-cache-in-loop",
        "torch.cuda.empty_cache() every step",
        "`{call}` every step synchronises and returns cached blocks that the next step must "
        "cudaMalloc again (slow); call it once, after freeing something large, if at all",
        "remove it from the loop",
    ),
    Rule(
        "TPL105",
        "unsynchronized-timing",
        "GPU work timed without synchronising",
        "this clock read times GPU work with no synchronisation: CUDA kernels run "
        "asynchronously, so it measures the launch, not the work; synchronise before "
        "reading the clock",
        "call torch.cuda.synchronize() before reading the clock (or use torch.cuda.Event timing)",
        fixable=True,
        default=False,
    ),
    Rule(
        "TPL201",
        "factory-in-forward-without-device",
        "tensor created in forward() without device=",
        "`{call}` in forward() creates the tensor on the CPU while the module may be on a "
        "GPU: 'Expected all tensors to be on the same device', or a copy every call; "
        "pass device={suggest}",
        "create it on the input's device: device=x.device (or register it as a buffer)",
        sim_events=("device mismatch",),
    ),
    Rule(
        "TPL202",
        "unregistered-tensor-attribute",
        "tensor attribute not registered as a buffer",
        "`self.{name}` is a plain tensor attribute: model.to(device) and model.cuda() leave "
        "it on the CPU ('Expected all tensors to be on the same device'); use "
        'self.register_buffer("{name}", ...)',
        'register it: self.register_buffer("name", tensor, persistent=False)',
        sim_events=("device mismatch",),
        default=False,
    ),
    Rule(
        "TPL203",
        "hardcoded-cuda",
        "CUDA hard-coded with no availability check",
        "{what} hard-codes CUDA and this file never checks torch.cuda.is_available(): it "
        "fails on machines without an NVIDIA GPU (CPU CI, Apple silicon); choose the "
        "device once and pass it",
        'choose once: device = "cuda" if torch.cuda.is_available() else "cpu", then .to(device)',
        sim_events=("invalid device",),
        default=False,
    ),
    Rule(
        "TPL204",
        "non-blocking-to-host",
        "non_blocking=True towards the host",
        "non_blocking=True on a copy to the CPU returns before the data has arrived: the "
        "tensor can be read as zeros or garbage unless you synchronise first; drop "
        "non_blocking (or synchronise before reading)",
        "use non_blocking only host-to-device from pinned memory",
        sim_events=("to cpu",),
        default=False,
    ),
    Rule(
        "TPL205",
        "non-blocking-without-pinned-memory",
        "non_blocking copy from a DataLoader that does not pin memory",
        "non_blocking=True copies a batch from `{loader}`, a DataLoader without "
        "pin_memory=True: from pageable memory the copy is synchronous, so nothing "
        "overlaps; pass pin_memory=True to the DataLoader",
        "DataLoader(..., pin_memory=True)",
    ),
    Rule(
        "TPL206",
        "cpu-construct-then-move",
        "tensor built on the CPU, then copied to the device",
        "`{call}` fills the tensor on the CPU and then copies it to the device; create it "
        "there directly: {suggest}",
        "pass device= to the factory instead of calling .to()/.cuda() on its result",
        fixable=True,
    ),
    Rule(
        "TPL301",
        "load-without-map-location",
        "torch.load without map_location",
        "`{call}` without map_location restores tensors to the device they were saved "
        "from: a GPU checkpoint fails on a machine without that GPU; pass "
        'map_location="cpu" (or the target device)',
        'torch.load(path, map_location="cpu")',
        default=False,
    ),
    Rule(
        "TPL302",
        "load-without-weights-only",
        "torch.load without weights_only",
        "`{call}` relies on the weights_only default, which changed to True in torch 2.6 "
        "(full pickles then fail to load; before 2.6 any pickle runs code); pass "
        "weights_only=True for tensors and state dicts",
        "torch.load(path, weights_only=True) (False only for files you trust)",
    ),
    Rule(
        "TPL303",
        "accumulated-loss-keeps-graph",
        "loss accumulated with its autograd graph",
        "accumulating `{name}` (it requires grad) keeps every step's autograd graph alive "
        "and the sum on the GPU; accumulate `{name}.detach()`",
        "accumulate loss.detach() (and call .item() once when logging)",
        fixable=True,
    ),
    Rule(
        "TPL401",
        "data-parallel",
        "nn.DataParallel",
        "nn.DataParallel runs one process for all GPUs (GIL-bound, gathers outputs and "
        "memory on GPU 0) and PyTorch recommends against it; use DistributedDataParallel "
        "(torchplace run / torchrun)",
        "use DistributedDataParallel, one process per GPU (see docs/ddp.md)",
        default=False,
    ),
    Rule(
        "TPL402",
        "deprecated-cuda-amp",
        "torch.cuda.amp / torch.cpu.amp API",
        "`{old}` is deprecated since torch 2.4 (FutureWarning) and ties the code to one "
        "device type; use `{new}`",
        'torch.amp.autocast("cuda", ...) and torch.amp.GradScaler("cuda", ...)',
        fixable=True,
        default=False,
    ),
)

#: Every rule, by code, in code order.
RULES: dict[str, Rule] = {r.code: r for r in _RULE_LIST}

#: Simulator event kind -> the rules whose pattern produces it. Sync kinds are those
#: ``torchplace sim`` records ("item", "tolist", "bool", "print", "to cpu",
#: "copy_ to host", "synchronize"); "device mismatch" is its "Expected all tensors to be
#: on the same device" error; "invalid device" an ordinal or CUDA that does not exist.
#: "copy_ to host" and "synchronize" map to no rule: an explicit copy or synchronize is
#: a choice the source states, not a mistake a rule can tell from the source alone.
SIM_EVENT_RULES: dict[str, tuple[str, ...]] = {
    "item": ("TPL101",),
    "tolist": ("TPL101",),
    "to cpu": ("TPL101", "TPL204"),
    "bool": ("TPL103",),
    "print": ("TPL102",),
    "copy_ to host": (),
    "synchronize": (),
    "device mismatch": ("TPL201", "TPL202"),
    "invalid device": ("TPL203",),
}


def rules_for_sim_event(kind: str) -> tuple[str, ...]:
    """The rule codes whose pattern produces a simulator event of this kind.

    The simulator calls this with the kind of a sync it recorded (``"item"``,
    ``"tolist"``, ``"bool"``, ``"print"``, ``"to cpu"``, ``"copy_ to host"``,
    ``"synchronize"``) or of a device error (``"device mismatch"``, ``"invalid
    device"``), and links its event to a finding of one of these rules on the same
    line. Unknown kinds map to no rule.

    Examples:
        >>> rules_for_sim_event("device mismatch")
        ('TPL201', 'TPL202')
        >>> rules_for_sim_event("synchronize")
        ()
    """
    return SIM_EVENT_RULES.get(kind, ())


class UnknownRuleError(ValueError):
    """A rule code or prefix that names no rule."""

    hint = "run `torchplace lint --list-rules` to see every rule"


def _expand(items: Iterable[str], option: str, *, opt_in: bool) -> set[str]:
    """The codes that items name; a prefix names opt-in rules only with ``opt_in``."""
    codes: set[str] = set()
    for item in items:
        for part in item.split(","):
            token = part.strip().upper()
            if not token:
                continue
            if token == "ALL":
                codes |= set(RULES)
                continue
            matched = {c for c in RULES if c.startswith(token)}
            if not token.startswith("TPL") or not matched:
                raise UnknownRuleError(
                    f"{option} {part.strip()!r} names no rule; valid codes are "
                    f"{', '.join(RULES)} (or a prefix such as TPL1, or ALL)."
                )
            if not opt_in and token not in RULES:
                matched = {c for c in matched if RULES[c].default}
            codes |= matched
    return codes


def check_codes(items: Iterable[str], option: str) -> None:
    """Raise :class:`UnknownRuleError` naming ``option`` for an item that names no rule."""
    _expand(items, option, opt_in=True)


def default_codes() -> tuple[str, ...]:
    """The codes that run when nothing is selected."""
    return tuple(c for c, r in RULES.items() if r.default)


def resolve_codes(
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> tuple[str, ...]:
    """The codes to check: ``select`` (default: the rules on by default) less ``ignore``.

    Each item may be a comma-separated list of codes or code prefixes (``TPL1`` means
    every ``TPL1xx`` rule that is on by default), or ``ALL``. An opt-in rule runs only
    when named by its full code or by ``ALL``. Raises :class:`UnknownRuleError` (a
    ``ValueError``) for an item that names no rule.
    """
    chosen = _expand(select, "--select", opt_in=False) if select else set(default_codes())
    chosen -= _expand(ignore or (), "--ignore", opt_in=True)
    return tuple(c for c in RULES if c in chosen)
