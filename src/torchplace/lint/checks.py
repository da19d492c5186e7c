"""The checks behind the rules: one method per rule over a module's :class:`Context`.

Each check looks for one pattern in Python's ``ast`` and follows data only as far as it
is sure: where it cannot tell (a name bound in another file, a condition it cannot
read), it stays silent. ``Checker(tree, source).run(codes)`` returns raw findings;
``torchplace.lint.engine`` adds the path, ``# noqa`` handling and files.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from torchplace.lint._context import (
    _FUNCS,
    _LOOPS,
    _SCOPES,
    Context,
    _walk_local,
    conditional_step,
    is_device_string,
    looks_like_device,
    name_tokens,
    tokens_of,
)
from torchplace.lint.finding import Edit, Fix
from torchplace.lint.rules import RULES

__all__ = ["Checker", "RawFinding"]


@dataclass(frozen=True)
class RawFinding:
    """A finding before it has a path: a node span (ast positions) and a message."""

    code: str
    node: ast.AST
    message: str
    fix: Fix | None = None


# factories that accept device= and fill the tensor themselves
_FACTORIES = frozenset(
    f"torch.{n}"
    for n in [
        "zeros",
        "empty",
        "ones",
        "full",
        "arange",
        "range",
        "linspace",
        "logspace",
        "eye",
        "rand",
        "randn",
        "randint",
        "randperm",
        "empty_strided",
        "tril_indices",
        "triu_indices",
    ]
)
# legacy constructors: always on the CPU, no device= at all
_LEGACY = frozenset(
    f"torch.{n}"
    for n in [
        "Tensor",
        "FloatTensor",
        "DoubleTensor",
        "HalfTensor",
        "BFloat16Tensor",
        "LongTensor",
        "IntTensor",
        "ShortTensor",
        "ByteTensor",
        "CharTensor",
        "BoolTensor",
    ]
)
_RANDOM = frozenset(f"torch.{n}" for n in ["rand", "randn", "randint", "randperm"])
# factories whose result is the same on any device (random ones differ per generator)
_DETERMINISTIC = frozenset(f"torch.{n}" for n in ["zeros", "empty", "ones", "full", "eye"])
_CLOCKS = frozenset(
    {
        "time.time",
        "time.perf_counter",
        "time.monotonic",
        "time.time_ns",
        "time.perf_counter_ns",
        "time.monotonic_ns",
        "timeit.default_timer",
    }
)
# methods that read a tensor on the host (a sync when it is on a GPU)
_HOST_READS = frozenset({"item", "tolist", "cpu", "numpy"})
# explicit synchronisation, or reads that wait for the device
_SYNC_ATTRS = frozenset(
    {"synchronize", "item", "tolist", "cpu", "numpy", "elapsed_time", "wait_event", "wait"}
)
# torch.* calls that do no device work
_NOT_WORK_PREFIXES = (
    "torch.cuda.",
    "torch.mps.",
    "torch.xpu.",
    "torch.accelerator.",
    "torch.backends.",
    "torch.utils.",
    "torch.jit.",
    "torch.distributed.",
    "torch.amp.",
    "torch.autograd.profiler",
    "torch.profiler.",
    "torch.random.",
)
_NOT_WORK = frozenset(
    f"torch.{n}"
    for n in [
        "device",
        "no_grad",
        "enable_grad",
        "inference_mode",
        "set_grad_enabled",
        "manual_seed",
        "seed",
        "load",
        "save",
        "is_tensor",
        "is_floating_point",
        "numel",
        "Size",
        "dtype",
        "from_numpy",
        "tensor",
        "as_tensor",
        "compile",
        "autocast",
        "get_default_dtype",
        "set_default_dtype",
        "set_float32_matmul_precision",
        "set_printoptions",
        "get_num_threads",
        "set_num_threads",
        "use_deterministic_algorithms",
    ]
)
# the amp API that moved to torch.amp, and where it went
_AMP = {
    "torch.cuda.amp.autocast": ("torch.amp.autocast", "cuda"),
    "torch.cpu.amp.autocast": ("torch.amp.autocast", "cpu"),
    "torch.cuda.amp.GradScaler": ("torch.amp.GradScaler", "cuda"),
    "torch.cuda.amp.custom_fwd": ("torch.amp.custom_fwd", "cuda"),
    "torch.cuda.amp.custom_bwd": ("torch.amp.custom_bwd", "cuda"),
}
# nn.Module methods that launch no kernel (TPL105 does not count them as device work)
_BOOKKEEPING = frozenset(
    {"train", "eval", "parameters", "named_parameters", "modules", "named_modules",
     "children", "state_dict", "zero_grad", "requires_grad_", "register_forward_hook"}
)  # fmt: skip
_EMPTY_CACHE = ("torch.cuda.empty_cache", "torch.mps.empty_cache", "torch.xpu.empty_cache")
_MOVES = frozenset({"to", "cuda", "type_as", "to_device", "copy_"})


def _method(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else None


def _kw(call: ast.Call, name: str) -> ast.keyword | None:
    for k in call.keywords:
        if k.arg == name:
            return k
    return None


def _has_star_kwargs(call: ast.Call) -> bool:
    return any(k.arg is None for k in call.keywords)


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _root_name(node: ast.AST) -> ast.Name | None:
    """``loss`` for ``loss.detach().cpu()``, ``batch`` for ``batch["x"].to(...)``."""
    while True:
        if isinstance(node, ast.Name):
            return node
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return None


def _targets(node: ast.For | ast.AsyncFor | ast.With | ast.comprehension) -> list[ast.expr]:
    """What a loop, comprehension or ``with`` binds: its target, or each ``as`` target."""
    if isinstance(node, ast.With):
        return [i.optional_vars for i in node.items if i.optional_vars]
    return [node.target]


def _names_bound(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _names_bound(elt)
    elif isinstance(target, ast.Starred):
        yield from _names_bound(target.value)


def _has_exit(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` can skip the rest of the current loop iteration (``continue``).

    ``break``, ``return`` and ``raise`` end the loop: the code after them still runs on
    every step until then, so they do not make it periodic.
    """

    def visit(node: ast.AST, in_loop: bool) -> bool:
        if isinstance(node, ast.Continue):
            return not in_loop
        if isinstance(node, _SCOPES):
            return False
        nested = in_loop or isinstance(node, _LOOPS)
        return any(visit(child, nested) for child in ast.iter_child_nodes(node))

    return visit(stmt, False)


def _stmt_list_containing(parent: ast.AST, child: ast.AST) -> list[ast.stmt] | None:
    for field in ("body", "orelse", "finalbody"):
        lst = getattr(parent, field, None)
        if isinstance(lst, list) and any(child is s for s in lst):
            return lst
    return None


class _Loop:
    """A training loop: a loop whose own body (not a nested loop) calls backward."""

    def __init__(self, node: ast.AST) -> None:
        self.node = node
        self.backward_calls: list[ast.Call] = []
        self.loss_names: set[str] = set()  # names backward() was called on
        self.retains_graph = False
        self.branches: set[tuple[int, str]] = set()  # (id(parent), field) on backward paths
        self.syncs: bool | None = None  # whether every step synchronises anyway

    @property
    def first_backward_line(self) -> int:
        return min(c.lineno for c in self.backward_calls)


class Checker:
    """Run the checks over one parsed module.

    Examples:
        >>> import ast
        >>> src = "import torch\\nm = torch.nn.DataParallel(net)\\n"
        >>> [f.code for f in Checker(ast.parse(src), src).run(["TPL401"])]
        ['TPL401']
    """

    def __init__(self, tree: ast.Module, source: str, path: str = "<string>") -> None:
        self.ctx = Context(tree, source, path)
        self.source = source
        self._line_starts: list[int] | None = None
        self._out: list[RawFinding] = []
        self._loops: dict[ast.AST, _Loop] | None = None

    # ---- plumbing -------------------------------------------------------------------

    def run(self, codes: Iterable[str]) -> list[RawFinding]:
        """The findings of the rules in ``codes`` (``TPL001`` is the engine's)."""
        self._out = []
        for code in codes:
            check: Callable[[], None] | None = getattr(self, f"check_{code.lower()}", None)
            if check is not None:
                check()
        return self._out

    def _emit(self, code: str, node: ast.AST, fix: Fix | None = None, **fields: str) -> None:
        message = RULES[code].message.format(**fields) if fields else RULES[code].message
        self._out.append(RawFinding(code, node, message, fix))

    def offset(self, line: int, col_bytes: int) -> int:
        """Character offset in the source of an ast (line, UTF-8 byte column) position."""
        if self._line_starts is None:
            starts = [0]
            for i, ch in enumerate(self.source):
                if ch == "\n":
                    starts.append(i + 1)
            self._line_starts = starts
        start = self._line_starts[line - 1]
        end = self.source.find("\n", start)
        text = self.source[start : end if end >= 0 else len(self.source)]
        if text.isascii():
            return start + col_bytes
        return start + len(text.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))

    def _span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def _text(self, node: ast.AST) -> str:
        start, end = self._span(node)
        return self.source[start:end]

    def _short(self, node: ast.AST, limit: int = 60) -> str:
        text = " ".join(self._text(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    # ---- training loops ---------------------------------------------------------------

    @property
    def loops(self) -> dict[ast.AST, _Loop]:
        """Training loops by node: the innermost loop around each training call.

        A training call is ``x.backward()``/``manual_backward``, a call of a function of
        this file that calls backward (``loss = train_step(batch)``), or a call handed
        both a value the loop computed and an optimizer, which steps it
        (``loss_scaler(loss, optimizer, ...)``).
        """
        if self._loops is None:
            self._loops = {}
            for call in self.ctx.calls:
                func = call.func
                backward = isinstance(func, ast.Attribute) and func.attr in (
                    "backward",
                    "manual_backward",
                )
                if not backward and not (call.args or call.keywords):
                    continue
                child: ast.AST = call
                path: list[tuple[int, str]] = []
                for parent in self.ctx.ancestors(call):
                    if isinstance(parent, _SCOPES):
                        break
                    path.append((id(parent), _field_of(parent, child)))
                    if isinstance(parent, _LOOPS) and any(child is s for s in parent.body):
                        name = self._loss_name(call) if backward else self._trains(call, parent)
                        if backward or name:
                            loop = self._loops.setdefault(parent, _Loop(parent))
                            loop.backward_calls.append(call)
                            loop.branches.update(path)
                            if name:
                                loop.loss_names.add(name)
                            if _kw(call, "retain_graph") or _kw(call, "create_graph"):
                                loop.retains_graph = True
                        break
                    child = parent
        return self._loops

    def _trains(self, call: ast.Call, loop: ast.AST) -> str | None:
        """The loss name if ``call`` trains (see :attr:`loops`), ``""`` if it trains
        without a known loss, else ``None``."""
        func = call.func
        if isinstance(func, ast.Name) and func.id in self._backward_functions:
            returned = self._backward_functions[func.id]
            assign = self.ctx.parents.get(call)
            if returned and isinstance(assign, ast.Assign) and len(assign.targets) == 1:
                target = assign.targets[0]
                if isinstance(target, ast.Name):
                    return target.id
            return ""
        values = [*call.args, *(k.value for k in call.keywords)]
        if not any(self._is_optimizer(v) for v in values):
            return None
        first = call.args[0] if call.args else None
        if not isinstance(first, ast.Name) or self._is_optimizer(first):
            return None
        assign = self.ctx.parents.get(call)
        if isinstance(assign, ast.Assign) and any(
            first.id in _names_bound(t) for t in assign.targets
        ):
            return None  # model, optimizer = prepare(model, optimizer): wraps, does not train
        bound_here = any(
            isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            and any(
                first.id in _names_bound(t)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            )
            for n in _walk_local(loop.body)  # type: ignore[attr-defined]
        )
        return first.id if bound_here else None

    def _is_optimizer(self, expr: ast.AST) -> bool:
        """An optimizer: named one (``optimizer``, ``self.optim``) or made by torch.optim."""
        name = self._dotted(expr).rpartition(".")[2]
        if not name:
            return False
        if name_tokens(name) & {"optimizer", "optimizers", "optim"}:
            return True
        return name in self._optimizer_names

    @cached_property
    def _optimizer_names(self) -> set[str]:
        names = set()
        for call, qualname in self.ctx.call_names:
            if qualname and qualname.startswith("torch.optim.") and qualname[12:13].isupper():
                assign = self.ctx.parents.get(call)
                if isinstance(assign, ast.Assign):
                    for target in assign.targets:
                        names.add(self._dotted(target).rpartition(".")[2])
        return names

    @cached_property
    def _backward_functions(self) -> dict[str, bool]:
        """Module-level functions that call backward: name -> whether they return the
        value they called it on."""
        found = {}
        for stmt in self.ctx.tree.body:
            if not isinstance(stmt, _FUNCS):
                continue
            losses = {
                self._loss_name(n)
                for n in _walk_local(stmt.body)
                if isinstance(n, ast.Call) and _method(n) in ("backward", "manual_backward")
            }
            if not losses:
                continue
            found[stmt.name] = any(
                isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id in losses
                for n in _walk_local(stmt.body)
            )
        return found

    @staticmethod
    def _loss_name(call: ast.Call) -> str | None:
        """``loss`` in ``loss.backward()``, ``scaler.scale(loss).backward()``,
        ``accelerator.backward(loss)``."""
        func = call.func
        assert isinstance(func, ast.Attribute)
        if func.attr == "backward" and isinstance(func.value, ast.Name) and not call.args:
            return func.value.id
        receiver = func.value
        if (
            isinstance(receiver, ast.Call)
            and _method(receiver) == "scale"
            and receiver.args
            and isinstance(receiver.args[0], ast.Name)
        ):
            return receiver.args[0].id
        if call.args and isinstance(call.args[0], ast.Name):  # accelerator.backward(loss)
            return call.args[0].id
        return None

    def every_step(self, node: ast.AST, *, read: bool = True) -> _Loop | None:
        """The training loop in which ``node`` runs on every step, else ``None``.

        ``None`` when ``node`` is not in a training loop, or runs only under a condition
        that the backward call is not under too (``if step % 100 == 0:``), or after an
        early ``continue``/``break`` that follows the backward call, or in test code.
        With ``read`` (a host read), also ``None`` in a loop that synchronises every step
        by design, and in a ``while`` loop inside the training loop that does not train
        itself (an environment rollout or a generation loop: its reads drive it). A
        framework's per-step hook (Lightning's ``training_step``) counts as the body of a
        training loop.
        """
        loops = self.loops
        if not (loops or self._framework_steps) or self.ctx.in_test(node):
            return None
        conditional = False
        exits: list[int] = []
        child = node
        for parent in self.ctx.ancestors(node):
            if isinstance(parent, _SCOPES):
                step = self._framework_steps.get(parent)
                return None if conditional or step is None else step
            loop = loops.get(parent)
            if read and isinstance(parent, ast.While) and loop is None:
                return None  # a rollout or generation loop inside a step: its reads drive it
            if (
                conditional_step(parent, child)
                and not self.ctx.is_main_guard(parent)
                and (id(parent), _field_of(parent, child)) not in self._all_branches
                and not _most_steps(parent, child)
            ):
                conditional = True
            siblings = _stmt_list_containing(parent, child)
            if siblings is not None:
                for s in siblings:
                    if s is child:
                        break
                    if _has_exit(s):
                        exits.append(s.lineno)
            if loop is not None and (
                any(child is s for s in loop.node.body)  # type: ignore[attr-defined]
                or (isinstance(parent, ast.While) and child is parent.test)
            ):
                # a `continue` between the backward call and node makes node periodic
                if any(line > loop.first_backward_line for line in exits):
                    conditional = True
                if conditional or (read and self._syncs_each_step(loop)):
                    return None
                return loop
            child = parent
        return None

    @cached_property
    def _framework_steps(self) -> dict[ast.AST, _Loop]:
        """Per-step hooks that a framework calls in its training loop: ``training_step``
        of a module class (PyTorch Lightning's hook). Its returned name is the loss."""
        steps: dict[ast.AST, _Loop] = {}
        for cls in self._module_classes():
            for method in cls.body:
                if isinstance(method, _FUNCS) and method.name == "training_step":
                    step = _Loop(method)
                    for node in _walk_local(method.body):
                        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
                            step.loss_names.add(node.value.id)
                    steps[method] = step
        return steps

    def _syncs_each_step(self, loop: _Loop) -> bool:
        """Whether the loop already waits for the device every step by design: its body
        calls ``synchronize()`` unconditionally (a loop that times each step); one more
        read costs nothing there. (``empty_cache()`` does not count: it is TPL104's.)"""
        if loop.syncs is None:
            loop.syncs = any(
                isinstance(n, ast.Call)
                and _method(n) == "synchronize"
                and not self.ctx.conditional_in(n, loop.node)
                for n in _walk_local(loop.node.body)  # type: ignore[attr-defined]
            )
        return loop.syncs

    @cached_property
    def _all_branches(self) -> set[tuple[int, str]]:
        branches: set[tuple[int, str]] = set()
        for loop in self.loops.values():
            branches |= loop.branches
        return branches

    def known_tensor(self, name: str, loop: _Loop) -> bool:
        """Whether ``name`` is a tensor wherever it is used in ``loop``'s scope: backward()
        was called on it, and no assignment in the scope makes it a number or a list."""
        if name not in loop.loss_names:
            return False
        scope = self.ctx.scope_of(loop.node)
        body = scope.body if isinstance(scope, (*_FUNCS, ast.Module)) else [scope]
        for node in _walk_local(body):
            value: ast.AST | None = None
            if isinstance(node, ast.Assign):
                if any(name in _names_bound(t) for t in node.targets):
                    value = node.value
                    if not any(isinstance(t, ast.Name) for t in node.targets):
                        return False  # unpacking: cannot tell which element
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                if name in _names_bound(node.target):
                    value = node.value
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.comprehension)) and any(
                name in _names_bound(t) for t in _targets(node)
            ):
                return False
            if value is not None and not _may_be_tensor(value):
                return False
        return True

    # ---- TPL1xx: host-device synchronisation ----------------------------------------

    def check_tpl101(self) -> None:
        if not self.ctx.uses_accelerator or not (self.loops or self._framework_steps):
            return
        found: dict[int, tuple[ast.Call, str]] = {}  # one per line: the first read there
        for call, name in self.ctx.call_names:
            method = _method(call)
            shown = None
            if method in _HOST_READS:
                if method != "cpu" and call.args:
                    continue
                receiver = call.func.value  # type: ignore[attr-defined]
                if self._not_a_tensor(receiver) or _reads_host_already(receiver):
                    continue
                loop = self.every_step(call)
                if loop is None or self._as_loaded(receiver, loop, call):
                    continue
                shown = f".{method}()"
            elif name in ("builtins.float", None) and isinstance(call.func, ast.Name):
                if call.func.id not in ("float", "int") or len(call.args) != 1:
                    continue
                arg = call.args[0]
                loop = self.every_step(call)
                if loop and isinstance(arg, ast.Name) and self.known_tensor(arg.id, loop):
                    shown = f"{call.func.id}({arg.id})"
            if shown is not None:
                first = found.get(call.lineno)
                if first is None or call.col_offset < first[0].col_offset:
                    found[call.lineno] = (call, shown)
        for call, shown in found.values():
            self._emit("TPL101", call, call=shown)

    def _as_loaded(self, receiver: ast.AST, loop: _Loop, read: ast.AST) -> bool:
        """Whether ``receiver`` is still what the loop's iterator gave (a DataLoader's
        batch is on the CPU): rooted at the loop's target, and neither re-bound nor moved
        (``x.to(device)`` as a statement) in the loop body before ``read``."""
        root = _root_name(receiver)
        node = loop.node
        if root is None or not isinstance(node, (ast.For, ast.AsyncFor)):
            return False
        if root.id not in set(_names_bound(node.target)):
            return False
        for stmt in _walk_local(node.body):
            if getattr(stmt, "lineno", read.lineno) >= read.lineno:  # type: ignore[attr-defined]
                continue
            if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if any(root.id in _names_bound(t) for t in targets):
                    return False
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                moved_root = _root_name(stmt.value)
                if (
                    _method(stmt.value) in ("to", "cuda")
                    and moved_root is not None
                    and moved_root.id == root.id
                ):
                    return False
        return True

    def _not_a_tensor(self, receiver: ast.AST) -> bool:
        if isinstance(receiver, (ast.Constant, ast.List, ast.Dict, ast.Tuple, ast.JoinedStr)):
            return True
        root = _root_name(receiver)
        if root is None:
            return False
        target = self.ctx.aliases.get(root.id)
        return target is not None and target.partition(".")[0] in ("numpy", "pandas", "math")

    def check_tpl102(self) -> None:
        if not self.ctx.uses_accelerator or not (self.loops or self._framework_steps):
            return
        for node in ast.walk(self.ctx.tree):
            target: ast.AST | None = None
            if isinstance(node, ast.FormattedValue):
                target = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in ("print", "str", "repr", "format") and node.args:
                    for arg in node.args:
                        if isinstance(arg, ast.Name):
                            self._tpl102(arg, arg)
                continue
            elif (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Mod)
                and isinstance(node.left, ast.Constant)
                and isinstance(node.left.value, str)
            ):
                right = node.right
                for elt in right.elts if isinstance(right, ast.Tuple) else [right]:
                    if isinstance(elt, ast.Name):
                        self._tpl102(elt, elt)
                continue
            if isinstance(target, ast.Name):
                self._tpl102(target, node)

    def _tpl102(self, name: ast.Name, node: ast.AST) -> None:
        loop = self.every_step(node)
        if loop is not None and self.known_tensor(name.id, loop):
            self._emit("TPL102", name, name=name.id)

    def check_tpl103(self) -> None:
        if not self.ctx.uses_accelerator or not (self.loops or self._framework_steps):
            return
        for node in ast.walk(self.ctx.tree):
            tests: list[ast.AST] = []
            if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
                tests = [node.test]
            elif isinstance(node, ast.BoolOp):
                tests = list(node.values)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                tests = [node.operand]
            for test in tests:
                if isinstance(test, ast.BoolOp):
                    continue  # its operands are visited on their own
                loop = self.every_step(test)
                if loop is not None and self._tensor_valued(test, loop):
                    self._emit("TPL103", test, expr=self._short(test))

    def _tensor_valued(self, expr: ast.AST, loop: _Loop) -> bool:
        if isinstance(expr, ast.Name):
            return self.known_tensor(expr.id, loop)
        if isinstance(expr, ast.Compare):
            sides = [expr.left, *expr.comparators]
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in expr.ops):
                return False
            return any(self._tensor_valued(s, loop) for s in sides)
        if isinstance(expr, ast.Call):
            name = self.ctx.qualname(expr.func)
            if name in ("torch.isnan", "torch.isinf", "torch.isfinite", "torch.any", "torch.all"):
                return bool(expr.args) and self._tensor_valued(expr.args[0], loop)
            if _method(expr) in ("any", "all", "isnan", "isinf", "isfinite", "detach"):
                return self._tensor_valued(expr.func.value, loop)  # type: ignore[attr-defined]
        return False

    def check_tpl104(self) -> None:
        if not self.loops:
            return
        for call, name in self.ctx.call_names:
            if name in _EMPTY_CACHE and self.every_step(call, read=False) is not None:
                self._emit("TPL104", call, call=f"{name}()")

    def check_tpl105(self) -> None:
        if not self.ctx.uses_accelerator:
            return
        for call, name in self.ctx.call_names:
            if name not in _CLOCKS:
                continue
            assign = self.ctx.parents.get(call)
            if not (
                isinstance(assign, ast.Assign)
                and assign.value is call
                and len(assign.targets) == 1
                and isinstance(assign.targets[0], ast.Name)
            ):
                continue
            start_name = assign.targets[0].id
            parent = self.ctx.parents.get(assign)
            siblings = _stmt_list_containing(parent, assign) if parent else None
            if siblings is None:
                continue
            index = next(i for i, s in enumerate(siblings) if s is assign)
            end = None
            for j in range(index + 1, len(siblings)):
                where = self._clock_in(siblings[j])
                if where == "nested":
                    break  # read inside a loop or branch: which work it times is unclear
                if where == "top":
                    end = j
                    break
            if end is None:
                continue
            if not self._subtracts(siblings[end:], start_name):
                continue
            region = siblings[index + 1 : end]
            # a sync just before the clock starts says the author times device work
            device_work = index > 0 and self._syncs(siblings[index - 1])
            if region and self._unsynced_work(region, self._placed_at(region[0]), device_work):
                self._emit("TPL105", siblings[end], fix=self._sync_fix(siblings[end]))

    def _syncs(self, stmt: ast.stmt) -> bool:
        """Whether a statement waits for an accelerator (also under ``if
        torch.cuda.is_available():``); ``torch.cpu.synchronize()`` does not."""
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call):
                name = self.ctx.qualname(n.func)
                if not (name or "").startswith("torch.cpu.") and self._is_sync(n, name, _method(n)):
                    return True
        return False

    @staticmethod
    def _is_sync(call: ast.Call, name: str | None, method: str | None) -> bool:
        """A synchronisation: ``.synchronize()``, a host read, or a helper named for one
        (``cuda_sync()``, ``device_synchronize()``)."""
        if method in _SYNC_ATTRS or (name and name.endswith(".synchronize")):
            return True
        return bool(name_tokens(_last_name_of(call.func)) & {"synchronize", "synchronise", "sync"})

    def _clock_in(self, stmt: ast.stmt) -> str | None:
        """``"top"`` if ``stmt`` reads a clock in its own expressions, ``"nested"`` if only
        in a statement nested in it (a loop body, a branch), else ``None``."""
        nested = False
        stack: list[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, _SCOPES):
                    continue
                if isinstance(child, ast.stmt):
                    if self._clock_in(child):
                        nested = True
                    continue
                if isinstance(child, ast.Call) and self.ctx.qualname(child.func) in _CLOCKS:
                    return "top"
                stack.append(child)
        return "nested" if nested else None

    @staticmethod
    def _subtracts(stmts: list[ast.stmt], name: str) -> bool:
        for node in _walk_local(stmts):
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Sub)
                and isinstance(node.right, ast.Name)
                and node.right.id == name
            ):
                return True
        return False

    @cached_property
    def _placements(self) -> dict[str, list[tuple[ast.AST, int, bool]]]:
        """For each name (``x``, ``self.net``): every binding as (scope, line, on a device).

        On a device: assigned from ``.to(device)``/``.cuda()`` or a factory with a device,
        or moved in place (``model.to(device)`` as a statement).
        """
        events: dict[str, list[tuple[ast.AST, int, bool]]] = {}
        for node in ast.walk(self.ctx.tree):
            targets: list[ast.AST] = []
            value: ast.AST | None = None
            if isinstance(node, ast.Assign):
                targets, value = list(node.targets), node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                call = node.value
                if self._on_device(call) and _method(call) in ("to", "cuda"):
                    targets, value = [call.func.value], call  # type: ignore[attr-defined]
            if value is None:
                continue
            on_device = isinstance(value, ast.Call) and self._on_device(value)
            scope = self.ctx.scope_of(node)
            for target in targets:
                name = self._dotted(target)
                if name:
                    line = node.lineno  # type: ignore[attr-defined]
                    events.setdefault(name, []).append((scope, line, on_device))
        return events

    def _on_device(self, call: ast.Call) -> bool:
        method = _method(call)
        if method == "cuda":
            return True
        if method == "to":
            return bool(any(looks_like_device(a) for a in call.args[:1]) or _kw(call, "device"))
        name = self.ctx.qualname(call.func)
        if name in _FACTORIES or name in ("torch.tensor", "torch.as_tensor"):
            device = _kw(call, "device")
            return device is not None and not (
                isinstance(device.value, ast.Constant) and device.value.value == "cpu"
            )
        return False

    def _placed_at(self, stmt: ast.stmt) -> set[str]:
        """Names on a device when ``stmt`` runs, as far as the file shows.

        A name bound in ``stmt``'s scope: its last binding before ``stmt``. A name bound
        only elsewhere (a global, ``self.net``): placed if every binding places it.
        """
        scope = self.ctx.scope_of(stmt)
        placed: set[str] = set()
        for name, events in self._placements.items():
            local = [e for e in events if e[0] is scope]
            if local:
                before = [e for e in local if e[1] < stmt.lineno]
                if before and before[-1][2]:
                    placed.add(name)
            elif all(e[2] for e in events):
                placed.add(name)
        return placed

    @staticmethod
    def _dotted(node: ast.AST) -> str:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return ""
        parts.append(node.id)
        return ".".join(reversed(parts))

    def _unsynced_work(
        self, region: list[ast.stmt], placed: set[str], device_work: bool = False
    ) -> bool:
        """Whether ``region`` launches device work after its last synchronisation.

        Work: a torch operation, backward(), optimizer.step(), or a call or arithmetic on
        something placed on a device; with ``device_work`` (the timing starts after a
        sync), any call that is not known to be harmless. After the last work, a sync or
        any call it does not know (which might synchronise) makes it answer False.
        """
        last_work = None
        last_other = None
        for node in _walk_local(region):
            # order by where each operation ends: a call runs after its receiver/arguments
            pos = (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
            if isinstance(node, ast.BinOp) and (
                self._dotted(node.left) in placed or self._dotted(node.right) in placed
            ):
                last_work = max(last_work or pos, pos)
                continue
            if not isinstance(node, ast.Call):
                continue
            name = self.ctx.qualname(node.func)
            method = _method(node)
            if self._is_sync(node, name, method):
                last_other = max(last_other or pos, pos)
            elif self._is_work(node, name, method, placed) or (
                device_work and not self._harmless(node, name, method) and not _reports(node)
            ):
                last_work = max(last_work or pos, pos)
            elif not self._harmless(node, name, method):
                last_other = max(last_other or pos, pos)
        return last_work is not None and (last_other is None or last_other < last_work)

    def _is_work(
        self, call: ast.Call, name: str | None, method: str | None, placed: set[str]
    ) -> bool:
        if name is not None and name.startswith("torch."):
            if name in _NOT_WORK or name.startswith(_NOT_WORK_PREFIXES):
                return False
            if name in _FACTORIES:
                device = _kw(call, "device")
                return device is not None and not (
                    isinstance(device.value, ast.Constant) and device.value.value == "cpu"
                )
            # an operation runs where its inputs are: on the device only for placed inputs
            return any(self._dotted(a) in placed for a in call.args)
        if method == "backward":
            return True
        func = call.func
        if method == "step" and "opt" in self._dotted(func.value).lower():  # type: ignore[attr-defined]
            return True
        callee = self._dotted(func)
        if method in _BOOKKEEPING:
            return False  # model.train(), model.eval(): no kernel
        # model(x), x.matmul(y): calls on placed objects (not f(model): f may synchronise)
        if callee in placed or bool(method and self._dotted(func.value) in placed):  # type: ignore[attr-defined]
            return True
        # model(batch.cuda()): a module fed what was just moved to the device runs there
        return not method and any(
            isinstance(a, ast.Call) and self._on_device(a) and _method(a) in ("to", "cuda")
            for a in call.args
        )

    @staticmethod
    def _harmless(call: ast.Call, name: str | None, method: str | None) -> bool:
        """Calls that cannot synchronise a device: clocks, logging of plain text, len()..."""
        if name is not None and (name in _CLOCKS or name.startswith(("time.", "math.", "os."))):
            return True
        func = call.func
        if isinstance(func, ast.Name) and func.id in (
            "len", "range", "enumerate", "zip", "isinstance", "min", "max", "round", "abs",
            "sorted", "list", "tuple", "dict", "set", "next", "iter", "getattr", "hasattr",
        ):  # fmt: skip
            return True
        if isinstance(func, ast.Name) and func.id == "print":
            return all(isinstance(a, ast.Constant) for a in call.args)
        return method in ("append", "extend", "format", "join", "update", "get", "items")

    def _sync_fix(self, stmt: ast.stmt) -> Fix | None:
        torch_name = self.ctx.torch_alias()
        if torch_name is None or self.ctx.accelerator_kinds - {"cuda"}:
            return None
        start = self.offset(stmt.lineno, 0)
        line_start = self.offset(stmt.lineno, stmt.col_offset)
        indent = self.source[start:line_start]
        if indent.strip():
            return None  # the statement does not start its line (``a = 1; t = time()``)
        text = (
            f"{indent}if {torch_name}.cuda.is_available():\n"
            f"{indent}    {torch_name}.cuda.synchronize()\n"
        )
        return Fix("synchronise before reading the clock", (Edit(start, start, text),))

    # ---- TPL2xx: placement -------------------------------------------------------------

    def _module_classes(self) -> list[ast.ClassDef]:
        """The ``nn.Module`` subclasses of the file: a base from ``torch.nn`` or Lightning,
        a base of this file that is one, or a class with ``forward`` whose base is not
        known here and that holds modules, parameters or buffers (or whose base is named
        ``*Module``). A class with ``forward`` and nothing to move (a data transform, a
        helper) is not one."""
        by_name = {c.name: c for c in self.ctx.classes}
        memo: dict[str, bool] = {}

        def is_module(cls: ast.ClassDef, seen: frozenset[str]) -> bool:
            if cls.name in memo:
                return memo[cls.name]
            result = False
            for base in cls.bases:
                name = self.ctx.qualname(base) or ""
                if name.startswith("torch.nn.") or name.endswith("LightningModule"):
                    result = True
                elif isinstance(base, ast.Name) and base.id in by_name:
                    if base.id not in seen:
                        result = result or is_module(by_name[base.id], seen | {cls.name})
                elif "module" in name_tokens(self._dotted(base).rpartition(".")[2]):
                    result = True
            if not result and any(isinstance(s, _FUNCS) and s.name == "forward" for s in cls.body):
                result = self._holds_state(cls)
            memo[cls.name] = result
            return result

        return [c for c in self.ctx.classes if is_module(c, frozenset())]

    def _holds_state(self, cls: ast.ClassDef) -> bool:
        """Whether a class registers modules, parameters or buffers on itself."""
        for node in _walk_local(cls.body):
            if isinstance(node, ast.Call):
                if _method(node) in ("register_buffer", "register_parameter", "add_module"):
                    return True
                name = self.ctx.qualname(node.func) or ""
                if name.startswith("torch.nn.") and name.rpartition(".")[2][:1].isupper():
                    parent = self.ctx.parents.get(node)
                    if isinstance(parent, ast.Assign) and any(
                        _self_attr(t) for t in parent.targets
                    ):
                        return True
        return False

    def check_tpl201(self) -> None:
        if self.ctx.sets_default_device:
            return
        for cls in self._module_classes():
            for method in cls.body:
                if isinstance(method, _FUNCS) and method.name == "forward":
                    self._tpl201(method)

    def _tpl201(self, forward: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        moved_names = {
            self._dotted(c.func.value)  # type: ignore[attr-defined]
            for c in _walk_local(forward.body)
            if isinstance(c, ast.Call) and _method(c) in _MOVES
        }
        for node in _walk_local(forward.body):
            if not isinstance(node, ast.Call):
                continue
            name = self.ctx.qualname(node.func)
            if name not in _FACTORIES and name not in _LEGACY and name != "torch.tensor":
                continue
            if any(_kw(node, k) for k in ("device", "out", "generator")) or _has_star_kwargs(node):
                continue  # out= and a generator decide the device themselves
            if name == "torch.tensor" and not (node.args and _is_list_expr(node.args[0])):
                continue  # a 0-dim tensor mixes with CUDA tensors; unknown data: silent
            if name in _LEGACY and not node.args:
                continue
            if self._moved_after(node) or self._in_device_context(node):
                continue
            parent = self.ctx.parents.get(node)
            if isinstance(parent, ast.Assign) and any(
                self._dotted(t) in moved_names for t in parent.targets
            ):
                continue
            if isinstance(parent, ast.Call) and _method(parent) in _MOVES:
                continue  # x.to(torch.zeros(...)) / out.copy_(torch.zeros(...))
            if self.ctx.in_test(node) or self.ctx.in_fake_mode(node):
                continue  # a CPU unit test's module; tensors without data
            if self._used_on_host(node, forward):
                continue
            self._emit("TPL201", node, call=f"{name}(...)", suggest="x.device")

    def _used_on_host(self, node: ast.AST, scope: ast.AST) -> bool:
        """Whether a value is only consumed on the host, where the CPU is the right device
        (a GPU value would cost a sync): read with ``.item()``/``.tolist()``, compared in
        a condition (``if torch.rand(1) < p:``), an index or slice bound, an argument of
        ``int()``/``float()``/``range()``; for a name it is bound to (through methods and
        slices: ``keep = torch.randperm(n)[:k]``), every use of the name is one of these."""
        value = self._chain_end(node)
        parent = self.ctx.parents.get(value)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            target = parent.targets[0]
            if not isinstance(target, ast.Name):
                return False
            uses = [
                n
                for n in _walk_local(scope.body)  # type: ignore[attr-defined]
                if isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)
            ]
            return bool(uses) and all(self._host_use(u) for u in uses)
        return self._host_use(node)

    def _chain_end(self, node: ast.AST) -> ast.AST:
        """The end of the method calls and slices applied to ``node``
        (``torch.randperm(n)[:k].long()`` for ``torch.randperm(n)``)."""
        while True:
            parent = self.ctx.parents.get(node)
            if isinstance(parent, ast.Subscript) and parent.value is node:
                node = parent
            elif isinstance(parent, ast.Attribute) and parent.value is node:
                call = self.ctx.parents.get(parent)
                if not isinstance(call, ast.Call) or call.func is not parent:
                    return node
                if parent.attr in ("item", "tolist", "numpy"):
                    return node
                node = call
            else:
                return node

    def _host_use(self, node: ast.AST) -> bool:
        child = node
        while True:
            parent = self.ctx.parents.get(child)
            if isinstance(parent, ast.Attribute) and parent.value is child:
                call = self.ctx.parents.get(parent)
                if not isinstance(call, ast.Call) or call.func is not parent:
                    return False
                if parent.attr in ("item", "tolist", "numpy"):
                    return True
                child = call  # a method: follow its result (.long(), .view())
            elif isinstance(parent, ast.Subscript):
                if child is parent.slice:
                    return True  # an index, not the indexed value
                child = parent  # a slice of it: follow
            elif isinstance(parent, ast.Slice):
                return True
            elif isinstance(parent, ast.Call):
                return isinstance(parent.func, ast.Name) and parent.func.id in (
                    "int", "float", "bool", "range", "len",
                )  # fmt: skip
            elif isinstance(parent, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Tuple)):
                child = parent  # (a tuple: one index of x[:, mask])
            elif isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)):
                return child is parent.test and child is not node
            else:
                return False

    def _moved_after(self, node: ast.AST) -> bool:
        """Whether a method chain on ``node`` moves it (``torch.zeros(n).float().to(x)``)."""
        child = node
        parent = self.ctx.parents.get(node)
        while isinstance(parent, ast.Attribute) and parent.value is child:
            call = self.ctx.parents.get(parent)
            if not isinstance(call, ast.Call) or call.func is not parent:
                return False
            if parent.attr in _MOVES:
                return True
            child, parent = call, self.ctx.parents.get(call)
        return False

    def _in_device_context(self, node: ast.AST) -> bool:
        for parent in self.ctx.ancestors(node):
            if isinstance(parent, (ast.With, ast.AsyncWith)):
                for item in parent.items:
                    expr = item.context_expr
                    if (
                        isinstance(expr, ast.Call)
                        and self.ctx.qualname(expr.func) == "torch.device"
                    ):
                        return True
        return False

    def check_tpl202(self) -> None:
        for cls in self._module_classes():
            methods = [s for s in cls.body if isinstance(s, _FUNCS)]
            if any(m.name in ("_apply", "to", "cuda") for m in methods):
                continue
            init = next((m for m in methods if m.name == "__init__"), None)
            if init is None:
                continue
            registered: set[str] = set()
            dynamic = False
            stored_elsewhere: set[str] = set()
            moved: set[str] = set()
            read_elsewhere: set[str] = set()
            for m in methods:
                for node in _walk_local(m.body):
                    if isinstance(node, ast.Call) and _method(node) in (
                        "register_buffer",
                        "register_parameter",
                    ):
                        arg = node.args[0] if node.args else None
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            registered.add(arg.value)
                        else:
                            dynamic = True
                    elif isinstance(node, ast.Call) and _method(node) in _MOVES:
                        attr = _self_attr(node.func.value)  # type: ignore[attr-defined]
                        if attr:
                            moved.add(attr)
                    elif (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Name)
                        and (node.func.id in ("setattr", "vars"))
                    ):
                        dynamic = True
                    attr = _self_attr(node)
                    if attr and m is not init:
                        if isinstance(node.ctx, ast.Store):  # type: ignore[attr-defined]
                            stored_elsewhere.add(attr)
                        else:
                            read_elsewhere.add(attr)
            if dynamic:
                continue
            for node in _walk_local(init.body):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target, value = node.targets[0], node.value
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    target, value = node.target, node.value
                else:
                    continue
                attr = _self_attr(target)
                if (
                    attr is None
                    or attr in registered
                    or attr in stored_elsewhere
                    or attr in moved
                    or attr not in read_elsewhere
                    or not self._cpu_tensor_expr(value)
                    or self.ctx.in_test(target)
                ):
                    continue  # (a test's module runs on the CPU)
                self._emit("TPL202", target, name=attr)

    def _cpu_tensor_expr(self, expr: ast.AST) -> bool:
        """A tensor made on the CPU: a factory without device=, maybe with methods chained
        (``torch.tensor([...]).view(1, 3, 1, 1)``), not moved, not a Parameter."""
        while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            if expr.func.attr in _MOVES:
                return False
            if self.ctx.qualname(expr.func) is not None:
                break  # torch.zeros(...) itself
            expr = expr.func.value
        if not isinstance(expr, ast.Call):
            return False
        name = self.ctx.qualname(expr.func)
        if name in ("torch.tensor", "torch.as_tensor"):
            if not (expr.args and _is_list_expr(expr.args[0])):
                return False  # 0-dim tensors mix with CUDA tensors; unknown data: silent
        elif name not in _FACTORIES and name not in _LEGACY and name != "torch.from_numpy":
            return False
        return _kw(expr, "device") is None and not _has_star_kwargs(expr)

    def check_tpl203(self) -> None:
        if self.ctx.checks_availability:
            return
        seen: set[int] = set()

        ctx = self.ctx

        def emit(node: ast.AST, what: str) -> None:
            line = node.lineno  # type: ignore[attr-defined]
            if (
                line in seen
                or ctx.under_condition(node)
                or ctx.expected_value(node)
                or ctx.gpu_only(node)
                or ctx.in_fake_mode(node)
            ):
                return
            seen.add(line)
            self._emit("TPL203", node, what=what)

        def cuda_value(node: ast.AST) -> str | None:
            """``'cuda'`` for a CUDA string, or a module-level name bound once to one."""
            if isinstance(node, ast.Name):
                bound = ctx.module_constant(node.id)
                if bound is not None and _cuda_const(bound):
                    return node.id
                return None
            return repr(node.value) if _cuda_const(node) else None  # type: ignore[attr-defined]

        for call, name in self.ctx.call_names:
            method = _method(call)
            if method == "cuda" and name != "torch.cuda":
                emit(call, "`.cuda()`")
            elif method == "to" and call.args and cuda_value(call.args[0]):
                emit(call, f"`.to({cuda_value(call.args[0])})`")
            elif name == "torch.device" and call.args and _cuda_const(call.args[0]):
                emit(call, f"`torch.device({call.args[0].value!r})`")  # type: ignore[attr-defined]
            else:
                device = _kw(call, "device")
                shown = cuda_value(device.value) if device is not None else None
                if shown:
                    emit(call, f"`device={shown}`")
        for attr in self.ctx.attributes:
            name = self.ctx.qualname(attr)
            if name and name.startswith("torch.cuda.") and name[11:] in _LEGACY_CUDA:
                emit(attr, f"`{name}`")

    def check_tpl204(self) -> None:
        for call, _name in self.ctx.call_names:
            non_blocking = _kw(call, "non_blocking")
            if _method(call) != "to" or non_blocking is None or not _is_true(non_blocking.value):
                continue
            target = call.args[0] if call.args else None
            device_kw = _kw(call, "device")
            if device_kw is not None:
                target = device_kw.value
            if target is None or not self._is_cpu(target):
                continue
            if self._synced_before_read(call):
                continue
            self._emit("TPL204", call)

    def _synced_before_read(self, copy: ast.Call) -> bool:
        """Whether the host waits for the device after ``copy`` and before its result is
        read: a ``synchronize()`` (or a helper named ``*synchronize``/``*sync``), a
        blocking read of another tensor (``.item()``, ``.tolist()``, ``.cpu()``, a copy to
        the CPU without ``non_blocking``) later in the same function. The copy and those
        reads share a stream, so the blocking one waits for the copy too."""
        stmt: ast.AST = copy
        for parent in self.ctx.ancestors(copy):
            if isinstance(parent, ast.stmt):
                stmt = parent
                break
        target = ""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = self._dotted(stmt.targets[0])
        block: ast.AST = stmt
        for parent in self.ctx.ancestors(stmt):
            siblings = _stmt_list_containing(parent, block)
            if siblings is not None:
                after = siblings[next(i for i, s in enumerate(siblings) if s is block) + 1 :]
                for node in _walk_local(after):
                    if (
                        target
                        and isinstance(getattr(node, "ctx", None), ast.Load)
                        and self._dotted(node) == target
                    ):
                        return False  # read before any sync
                    if isinstance(node, ast.Call) and self._waits_for_device(node, target):
                        return True
            if isinstance(parent, _SCOPES):
                return False
            block = parent
        return False

    def _waits_for_device(self, call: ast.Call, target: str) -> bool:
        name = _last_name_of(call.func)
        if name_tokens(name) & {"synchronize", "synchronise", "sync"}:
            return True
        method = _method(call)
        receiver = self._dotted(call.func.value) if method else ""  # type: ignore[attr-defined]
        if target and receiver == target:
            return False
        if method in ("item", "tolist", "cpu"):
            return True
        if method == "to" and call.args and self._is_cpu(call.args[0]):
            non_blocking = _kw(call, "non_blocking")
            return non_blocking is None or not _is_true(non_blocking.value)
        return False

    def _is_cpu(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value == "cpu"
        if isinstance(node, ast.Call) and self.ctx.qualname(node.func) == "torch.device":
            return (
                bool(node.args)
                and isinstance(node.args[0], ast.Constant)
                and (node.args[0].value == "cpu")
            )
        return False

    def check_tpl205(self) -> None:
        for loop_node in ast.walk(self.ctx.tree):
            if not isinstance(loop_node, (ast.For, ast.AsyncFor)):
                continue
            # the loader itself, or handed to a wrapper: enumerate(loader), tqdm(loader),
            # logger.log_every(loader, 10), zip(loader_a, loader_b)
            source = None
            for name in _names_handed(loop_node.iter):
                if self._unpinned_loader(name.id, loop_node) is not None:
                    source = name
                    break
            if source is None:
                continue
            batch_names = set(_names_bound(loop_node.target))
            for node in _walk_local(loop_node.body):
                if not isinstance(node, ast.Call) or _method(node) not in ("to", "cuda"):
                    continue
                nb = _kw(node, "non_blocking")
                if nb is None or not _is_true(nb.value):
                    continue
                target = node.args[0] if node.args else None
                if target is not None and self._is_cpu(target):
                    continue
                root = _root_name(node.func.value)  # type: ignore[attr-defined]
                if root is not None and root.id in batch_names:
                    self._emit("TPL205", node, loader=source.id)

    def _unpinned_loader(self, name: str, loop: ast.AST) -> ast.Call | None:
        scope = self.ctx.scope_of(loop)
        body = scope.body if isinstance(scope, (*_FUNCS, ast.Module)) else []
        values = []
        for node in _walk_local(body):
            if (
                isinstance(node, ast.Assign) and any(name in _names_bound(t) for t in node.targets)
            ) or (
                isinstance(node, (ast.AugAssign, ast.AnnAssign))
                and name in _names_bound(node.target)
            ):
                values.append(node.value)
            elif (
                isinstance(node, (ast.For, ast.AsyncFor, ast.With))
                and node is not loop
                and any(name in _names_bound(t) for t in _targets(node))
            ):
                return None
        if isinstance(scope, _FUNCS):
            args = scope.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            if any(a.arg == name for a in params):
                return None
        if len(values) != 1 or not isinstance(values[0], ast.Call):
            return None
        call = values[0]
        if self.ctx.qualname(call.func) != "torch.utils.data.DataLoader" or _has_star_kwargs(call):
            return None
        pin = _kw(call, "pin_memory")
        if pin is not None and not (
            isinstance(pin.value, ast.Constant) and pin.value.value is False
        ):
            return None
        if len(call.args) > 7:  # pin_memory given positionally
            return None
        return call

    def check_tpl206(self) -> None:
        for call, name in self.ctx.call_names:
            if name not in _FACTORIES:
                continue
            if any(
                _kw(call, k) for k in ("device", "out", "requires_grad", "pin_memory", "generator")
            ):
                continue  # a generator draws on its own device
            if _has_star_kwargs(call):
                continue
            if name in _RANDOM and not self._per_step(call):
                continue  # a one-time CPU draw: cheap, and the same numbers on every device
            attr = self.ctx.parents.get(call)
            move = self.ctx.parents.get(attr) if attr is not None else None
            if not (
                isinstance(attr, ast.Attribute)
                and attr.attr in ("to", "cuda")
                and isinstance(move, ast.Call)
                and move.func is attr
            ):
                continue
            device_text = self._move_target(move)
            if device_text is None or self.ctx.in_fake_mode(call):
                continue
            suggest = f"{name}(..., device={device_text})"
            fix = self._construct_fix(call, move, name, device_text)
            self._emit("TPL206", call, fix, call=f"{name}(...).{attr.attr}(...)", suggest=suggest)

    def _per_step(self, node: ast.AST) -> bool:
        """Whether ``node`` runs again and again outside tests: in a loop, in a module's
        ``forward``, or in a function that the file calls in a loop."""
        if self.ctx.in_test(node):
            return False
        for parent in self.ctx.ancestors(node):
            if isinstance(parent, _LOOPS):
                return True
            if isinstance(parent, _FUNCS):
                return (
                    parent.name == "forward"
                    or parent.name in self._called_in_loops
                    or any(isinstance(p, _LOOPS) for p in self.ctx.ancestors(parent))
                )
        return False

    @cached_property
    def _called_in_loops(self) -> set[str]:
        """Names of the functions this file calls inside a loop (``gradient_penalty(...)``
        in a training loop runs every step)."""
        names = set()
        for call in self.ctx.calls:
            if isinstance(call.func, ast.Name) and any(
                isinstance(p, _LOOPS) for p in self.ctx.ancestors(call)
            ):
                names.add(call.func.id)
        return names

    def _move_target(self, move: ast.Call) -> str | None:
        """The device a ``.to(...)``/``.cuda(...)`` moves to, as source text, if it is one."""
        if _method(move) == "cuda":
            if not move.args and not move.keywords:
                return '"cuda"'
            if (
                len(move.args) == 1
                and isinstance(move.args[0], ast.Constant)
                and isinstance(move.args[0].value, int)
            ):
                return f'"cuda:{move.args[0].value}"'
            return None
        device = _kw(move, "device")
        arg = device.value if device is not None else (move.args[0] if move.args else None)
        if arg is None or not looks_like_device(arg):
            return None
        if isinstance(arg, ast.Constant) and arg.value == "cpu":
            return None  # already there
        return self._text(arg)

    def _construct_fix(
        self, factory: ast.Call, move: ast.Call, name: str, device_text: str
    ) -> Fix | None:
        step = factory.args[2] if len(factory.args) > 2 else None
        step_kw = _kw(factory, "step")
        step = step_kw.value if step_kw is not None else step
        deterministic = name in _DETERMINISTIC or (
            name == "torch.arange"
            and (step is None or (isinstance(step, ast.Constant) and isinstance(step.value, int)))
        )
        if not deterministic:
            return None
        extra = [k for k in move.keywords if k.arg not in ("device", "non_blocking")]
        positional = move.args if _method(move) == "to" else []
        if extra or len(positional) > 1 or (positional and _kw(move, "device")):
            return None
        if not factory.args and not factory.keywords:
            return None
        # insert after the factory's last argument (a trailing comma stays), drop .to(...)
        last = max(
            [*factory.args, *(k.value for k in factory.keywords)],
            key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0),
        )
        _, insert_at = self._span(last)
        _, f_end = self._span(factory)
        _, m_end = self._span(move)
        edits = (Edit(insert_at, insert_at, f", device={device_text}"), Edit(f_end, m_end, ""))
        return Fix(f"create the tensor with device={device_text}", edits)

    # ---- TPL3xx: memory and checkpoints --------------------------------------------------

    def check_tpl301(self) -> None:
        for call, name in self.ctx.call_names:
            if name not in ("torch.load", "torch.jit.load") or _has_star_kwargs(call):
                continue
            if _kw(call, "map_location") is not None or len(call.args) >= 2 or not call.args:
                continue
            if self._saved_here(call) or not self._loads_a_checkpoint(call):
                continue
            if self.ctx.gpu_only(call) or self.ctx.in_test(call):
                continue  # GPU-only code loads GPU checkpoints fine; a test loads its own
            self._emit("TPL301", call, call=f"{name}(...)")

    @cached_property
    def _saved_files(self) -> set[str]:
        return {
            self._file_key(c.args[1])
            for c, n in self.ctx.call_names
            if n in ("torch.save", "torch.jit.save") and len(c.args) >= 2
        }

    def _saved_here(self, load: ast.Call) -> bool:
        """Whether this program wrote what it loads, on this machine: the file saves to
        the same path (or path pattern), the argument comes from a ``save*`` helper, or
        bytes in memory are loaded in a file that saves to bytes."""
        arg = load.args[0]
        if self._file_key(arg) in self._saved_files:
            return True
        scope = self.ctx.scope_of(load)
        body = scope.body if isinstance(scope, (*_FUNCS, ast.Module)) else []
        source = arg
        if isinstance(arg, ast.Name):
            for node in _walk_local(body):
                if (
                    isinstance(node, ast.Assign)
                    and node.lineno < load.lineno
                    and any(arg.id in _names_bound(t) for t in node.targets)
                ):
                    source = node.value
        if isinstance(source, ast.Call):
            words = name_tokens(_last_name_of(source.func))
            if "save" in words or "saved" in words:
                return True
            if words & {"bytes", "io"} and self._saved_files:
                return True  # io.BytesIO(row): bytes this file serialised
        return False

    def _loads_a_checkpoint(self, load: ast.Call) -> bool:
        """Whether what is loaded is model state, which a GPU run saves on the GPU: it
        goes into ``load_state_dict``/``set_*state_dict``, or the call, the name it is
        bound to or the path says state, weights, checkpoint or model. Data files,
        metrics and caches are written on the CPU as a rule: silent."""
        words = tokens_of(load.args[0], strings=True)
        node: ast.AST = load
        parent = self.ctx.parents.get(node)
        while isinstance(parent, ast.Subscript) and parent.value is node:  # torch.load(p)["model"]
            words |= tokens_of(parent.slice, strings=True)
            node, parent = parent, self.ctx.parents.get(parent)
        if isinstance(parent, ast.Call):
            words |= name_tokens(_last_name_of(parent.func))
        elif isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            for target in targets:
                words |= name_tokens(self._dotted(target).rpartition(".")[2])
                if isinstance(target, ast.Name):
                    words |= self._callers_of(target.id, load)
        return bool(words & _CHECKPOINT_WORDS)

    def _callers_of(self, name: str, after: ast.AST) -> set[str]:
        """The words of the functions a name is handed to after ``after``."""
        scope = self.ctx.scope_of(after)
        body = scope.body if isinstance(scope, (*_FUNCS, ast.Module)) else []
        words: set[str] = set()
        for node in _walk_local(body):
            if isinstance(node, ast.Call) and node.lineno >= after.lineno:  # type: ignore[attr-defined]
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if _root_name(arg) is not None and _root_name(arg).id == name:  # type: ignore[union-attr]
                        words |= name_tokens(_last_name_of(node.func))
        return words

    def _file_key(self, expr: ast.AST) -> str:
        """The file an argument names, as text: ``args.save`` for ``f`` after
        ``with open(args.save, "rb") as f``; a formatted path by its template
        (``"ckpt_%d.pth" % epoch`` and ``"ckpt_%d.pth" % args.epoch`` are one file
        pattern, as a program saves and later resumes it)."""
        if isinstance(expr, ast.Name):
            for parent in self.ctx.ancestors(expr):
                if isinstance(parent, (ast.With, ast.AsyncWith)):
                    for item in parent.items:
                        var = item.optional_vars
                        ctx_expr = item.context_expr
                        if (
                            isinstance(var, ast.Name)
                            and var.id == expr.id
                            and isinstance(ctx_expr, ast.Call)
                            and ctx_expr.args
                        ):
                            return self._file_key(ctx_expr.args[0])
        template = _path_template(expr)
        return template if template is not None else self._text(expr)

    def check_tpl302(self) -> None:
        for call, name in self.ctx.call_names:
            if name != "torch.load":
                continue
            if _has_star_kwargs(call) and not self._kwargs_lack(call, "weights_only"):
                continue
            if _kw(call, "weights_only") is None and len(call.args) < 4:
                self._emit("TPL302", call, call="torch.load(...)")

    def _kwargs_lack(self, call: ast.Call, key: str) -> bool:
        """Whether every ``**kwargs`` of ``call`` is a dict built in the same function
        (``{...}`` or ``dict(...)``) that never gets ``key``."""
        scope = self.ctx.scope_of(call)
        body = scope.body if isinstance(scope, (*_FUNCS, ast.Module)) else []
        for star in (k for k in call.keywords if k.arg is None):
            if not isinstance(star.value, ast.Name):
                return False
            name = star.value.id
            built = False
            for node in _walk_local(body):
                if isinstance(node, ast.Assign) and any(
                    name in _names_bound(t) for t in node.targets
                ):
                    value = node.value
                    if isinstance(value, ast.Dict) and all(k is not None for k in value.keys):
                        keys = {k.value for k in value.keys if isinstance(k, ast.Constant)}
                        built = key not in keys and len(keys) == len(value.keys)
                    elif isinstance(value, ast.Call) and _last_name_of(value.func) == "dict":
                        built = not value.args and all(
                            k.arg is not None and k.arg != key for k in value.keywords
                        )
                    else:
                        return False
                    if not built:
                        return False
                elif (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.ctx, ast.Store)
                    and self._dotted(node.value) == name
                ) or (
                    isinstance(node, ast.Call)
                    and _method(node) in ("update", "setdefault")
                    and self._dotted(node.func.value) == name  # type: ignore[attr-defined]
                ):
                    return False  # kwargs["..."] = ..., kwargs.update(...): may add it
            if not built:
                return False
        return True

    def check_tpl303(self) -> None:
        for loop in self.loops.values():
            if loop.retains_graph or not loop.loss_names or self.ctx.in_test(loop.node):
                continue  # a test's few steps
            for node in _walk_local(loop.node.body):  # type: ignore[attr-defined]
                added: ast.Name | None = None
                acc: ast.AST | None = None
                if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
                    if isinstance(node.value, ast.Name):
                        added, acc = node.value, node.target
                elif (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.BinOp)
                    and isinstance(node.value.op, ast.Add)
                ):
                    t = node.targets[0].id
                    left, right = node.value.left, node.value.right
                    if isinstance(left, ast.Name) and left.id == t and isinstance(right, ast.Name):
                        added, acc = right, node.targets[0]
                    elif (
                        isinstance(right, ast.Name) and right.id == t and isinstance(left, ast.Name)
                    ):
                        added, acc = left, node.targets[0]
                elif (
                    isinstance(node, ast.Call)
                    and _method(node) == "append"
                    and len(node.args) == 1
                    and isinstance(node.args[0], ast.Name)
                ):
                    added, acc = node.args[0], node.func.value  # type: ignore[attr-defined]
                if added is None or acc is None:
                    continue
                if isinstance(acc, ast.Name) and acc.id == added.id:
                    continue
                if not self.known_tensor(added.id, loop) or self._backward_on(acc, loop):
                    continue
                _, end = self._span(added)
                fix = Fix(f"accumulate {added.id}.detach()", (Edit(end, end, ".detach()"),))
                self._emit("TPL303", added, fix, name=added.id)

    def _backward_on(self, acc: ast.AST, loop: _Loop) -> bool:
        """Whether the scope differentiates the accumulator (then it must keep its graph)."""
        text = self._dotted(acc)
        scope = self.ctx.scope_of(loop.node)
        body = scope.body if isinstance(scope, (*_FUNCS, ast.Module)) else []
        for node in _walk_local(body):
            if isinstance(node, ast.Call):
                if _method(node) in ("backward", "manual_backward") and (
                    self._dotted(node.func.value) == text  # type: ignore[attr-defined]
                    or any(self._dotted(a) == text for a in node.args)
                ):
                    return True
                if self.ctx.qualname(node.func) in (
                    "torch.autograd.grad",
                    "torch.autograd.backward",
                ):
                    return True
        return False

    # ---- TPL4xx: APIs -----------------------------------------------------------------

    def check_tpl401(self) -> None:
        for call, name in self.ctx.call_names:
            if (
                name in ("torch.nn.DataParallel", "torch.nn.parallel.data_parallel")
                and not self._inference_only
                and not self.ctx.in_test(call)  # a test of DataParallel support
            ):
                self._emit("TPL401", call)

    @cached_property
    def _inference_only(self) -> bool:
        """Whether the file only runs models: it never trains (no backward, no optimizer
        step) and evaluates (``.eval()``, ``no_grad``, ``inference_mode``). PyTorch's
        advice against DataParallel is about training."""
        evaluates = False
        for call, name in self.ctx.call_names:
            method = _method(call)
            if method in ("backward", "manual_backward"):
                return False
            if method == "step" and self._is_optimizer(call.func.value):  # type: ignore[attr-defined]
                return False
            if method == "eval" or name in ("torch.no_grad", "torch.inference_mode"):
                evaluates = True
        return evaluates

    def check_tpl402(self) -> None:
        calls = {id(c.func): c for c in self.ctx.calls}
        for node in ast.walk(self.ctx.tree):
            if not isinstance(node, (ast.Attribute, ast.Name)):
                continue
            if not isinstance(node.ctx, ast.Load):
                continue
            parent = self.ctx.parents.get(node)
            if isinstance(parent, ast.Attribute):
                continue  # only the whole dotted name
            name = self.ctx.qualname(node)
            if name not in _AMP:
                continue
            if isinstance(node, ast.Name) and isinstance(parent, (ast.ImportFrom, ast.Import)):
                continue
            if self._compat_fallback(node):
                continue
            new, device = _AMP[name]
            call = calls.get(id(node))
            fix = self._amp_fix(node, call, new, device)
            shown_new = (
                f'{new}("{device}", ...)'
                if "custom" not in new
                else (f'{new}(device_type="{device}")')
            )
            self._emit("TPL402", call or node, fix, old=name, new=shown_new)

    def _compat_fallback(self, node: ast.AST) -> bool:
        """Whether ``node`` is the old API kept for old torch, or not a use at all: in an
        ``except`` handler of a ``try`` that uses ``torch.amp`` (or that catches
        ``AttributeError``/``ImportError``), in a branch of a test of torch's version or
        of ``hasattr(torch.amp, ...)``, a name imported in such a place, or a class named
        in ``isinstance``/``issubclass``/``assertIsInstance`` (no object is made, nothing
        warns)."""
        parent = self.ctx.parents.get(node)
        if (
            isinstance(parent, (ast.Call, ast.Tuple))
            and node is not getattr(parent, "func", None)
            and any(
                isinstance(p, ast.Call)
                and any(w in _last_name_of(p.func).lower() for w in ("isinstance", "issubclass"))
                for p in (parent, self.ctx.parents.get(parent))
            )
        ):
            return True
        if isinstance(node, ast.Name):
            binding = self._import_of(node.id)
            if binding is not None and self._in_compat_branch(binding):
                return True
        return self._in_compat_branch(node)

    def _import_of(self, name: str) -> ast.AST | None:
        for stmt in ast.walk(self.ctx.tree):
            if isinstance(stmt, ast.ImportFrom) and any(
                (a.asname or a.name) == name for a in stmt.names
            ):
                return stmt
        return None

    def _in_compat_branch(self, node: ast.AST) -> bool:
        child = node
        for parent in self.ctx.ancestors(node):
            if isinstance(parent, ast.ExceptHandler):
                caught = tokens_of(parent.type, strings=True) if parent.type is not None else set()
                if caught & {"attribute", "import", "module"}:
                    return True
                tried = self.ctx.parents.get(parent)
                if isinstance(tried, ast.Try) and any(
                    self.ctx.qualname(n) == "torch.amp"
                    for stmt in tried.body
                    for n in ast.walk(stmt)
                    if isinstance(n, ast.Attribute)
                ):
                    return True
            if isinstance(parent, ast.If) and child is not parent.test:
                words = tokens_of(parent.test, strings=True)
                if words & {"version", "hasattr"}:
                    return True  # if TORCH_VERSION < ...: / if hasattr(torch.amp, ...):
            if isinstance(parent, _SCOPES):
                return False
            child = parent
        return False

    def _amp_fix(self, node: ast.AST, call: ast.Call | None, new: str, device: str) -> Fix | None:
        root = _root_name(node)
        if (
            root is None
            or self.ctx.aliases.get(root.id) != "torch"
            or not isinstance(node, ast.Attribute)
        ):
            return None  # imported under another name: the import would change too
        new_text = root.id + new[len("torch") :]
        start, end = self._span(node)
        if "custom" in new:
            if call is None:
                return Fix(
                    f"use {new}",
                    (Edit(start, end, f'{new_text}(device_type="{device}")'),),
                )
            if call.args:
                return None
            opening = self._open_paren(call, node)
            if opening is None:
                return None
            sep = ", " if call.keywords else ""
            return Fix(
                f"use {new}",
                (
                    Edit(start, end, new_text),
                    Edit(opening, opening, f'device_type="{device}"{sep}'),
                ),
            )
        if call is None:
            return None
        if "autocast" in new and call.args:
            return None  # positional order differs: (enabled, dtype) vs (device_type, dtype)
        opening = self._open_paren(call, node)
        if opening is None:
            return None
        sep = ", " if (call.args or call.keywords) else ""
        return Fix(
            f"use {new}", (Edit(start, end, new_text), Edit(opening, opening, f'"{device}"{sep}'))
        )

    def _open_paren(self, call: ast.Call, func: ast.AST) -> int | None:
        _, end = self._span(func)
        _, call_end = self._span(call)
        rest = self.source[end:call_end]
        stripped = rest.lstrip()
        if not stripped.startswith("("):
            return None
        return end + (len(rest) - len(stripped)) + 1


_LEGACY_CUDA = frozenset(n.removeprefix("torch.") for n in _LEGACY) - {"Tensor"}  # torch.cuda.*


def _cuda_const(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and is_device_string(node.value)
        and str(node.value).startswith("cuda")
    )


def _self_attr(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return None


def _reads_host_already(receiver: ast.AST) -> bool:
    """Whether a chain already contains a host read (report ``x.cpu().numpy()`` once)."""
    node = receiver
    while True:
        if isinstance(node, ast.Call):
            if _method(node) in _HOST_READS:
                return True
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return False


def _may_be_tensor(value: ast.AST) -> bool:
    """False for values that are plainly not tensors: numbers, strings, ``x.item()``."""
    if isinstance(value, (ast.Constant, ast.List, ast.Dict, ast.Tuple, ast.JoinedStr)):
        return False
    if isinstance(value, ast.Call):
        if _method(value) in ("item", "tolist", "numpy"):
            return False
        if isinstance(value.func, ast.Name) and value.func.id in ("float", "int", "len", "sum"):
            return False
    return True


# what a checkpoint's path, name or consumer says
_CHECKPOINT_WORDS = frozenset(
    {
        "state", "states", "dict", "ckpt", "checkpoint", "checkpoints", "weights", "weight",
        "model", "models", "pretrained", "resume", "params", "parameters", "sd", "pth",
    }
)  # fmt: skip


def _is_list_expr(node: ast.AST) -> bool:
    """A literal sequence, a comprehension, or ``+``/``*`` of them (``[1.0] + [2.0] * k``)."""
    if isinstance(node, (ast.List, ast.Tuple, ast.ListComp)):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        return _is_list_expr(node.left) or _is_list_expr(node.right)
    return False


def _reports(call: ast.Call) -> bool:
    """A call that reports rather than computes: ``print(...)``, ``logger.info(...)``,
    ``f.write(...)`` (it may read a tensor, but it launches no device work)."""
    return _last_name_of(call.func) in (
        "print", "info", "debug", "warning", "error", "write", "log", "set_postfix",
    )  # fmt: skip


def _path_template(expr: ast.AST) -> str | None:
    """The constant text of a formatted path with its fields blanked:
    ``"out/%s_%d.pth" % (a, b)`` and ``f"out/{a}_{b}.pth"`` give ``"out/{}_{}.pth"``."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        expr = expr.left
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        text = expr.value
        for spec in ("%s", "%d", "%i", "%f", "%r"):
            text = text.replace(spec, "{}")
        return text
    if isinstance(expr, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
            for v in expr.values
        )
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "format"
        and isinstance(expr.func.value, ast.Constant)
        and isinstance(expr.func.value.value, str)
    ):
        return "".join(
            part if i % 2 == 0 else "{}"
            for i, part in enumerate(expr.func.value.value.replace("}", "{").split("{"))
        )
    return None


def _names_handed(expr: ast.AST) -> Iterator[ast.Name]:
    """``expr`` if it is a name, else the names passed to it as a call, recursively."""
    if isinstance(expr, ast.Name):
        yield expr
    elif isinstance(expr, ast.Call):
        for arg in [*expr.args, *(k.value for k in expr.keywords)]:
            yield from _names_handed(arg)


def _last_name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _most_steps(parent: ast.AST, child: ast.AST) -> bool:
    """Whether ``child`` is the ``else`` of a periodic test (``if step % 100 == 0:``),
    which runs on every other step."""
    if not isinstance(parent, ast.If) or not any(child is s for s in parent.orelse):
        return False
    return _periodic(parent.test)


def _periodic(test: ast.AST) -> bool:
    """``step % n == 0``, ``not step % n``, or an ``and`` with one of them."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_periodic(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return isinstance(test.operand, ast.BinOp) and isinstance(test.operand.op, ast.Mod)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = (test.left, test.comparators[0])
        return any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mod) for x in sides)
    return False


def _field_of(parent: ast.AST, child: ast.AST) -> str:
    for field, value in ast.iter_fields(parent):
        if value is child:
            return field
        if isinstance(value, list) and any(v is child for v in value):
            return field
    return ""
