"""What the checks know about one parsed module: names, parents, loops, classes.

Built in one walk over Python's own ``ast``. Names are resolved through the module's
imports only (``import torch as th`` makes ``th.load`` ``torch.load``); a name that no
import binds resolves to ``None``, and the checks then stay silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cached_property

__all__ = ["Context", "is_device_string"]

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)

# spelled-out module paths -> the name the checks use
_CANONICAL = {
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.cuda.amp.GradScaler",
    "torch.cpu.amp.autocast_mode.autocast": "torch.cpu.amp.autocast",
    "torch.cpu.amp.grad_scaler.GradScaler": "torch.cpu.amp.GradScaler",
    "torch.serialization.load": "torch.load",
}

# availability checks: a file with one of these chooses its device, so CUDA is not
# hard-coded in it (TPL203 stays silent)
_AVAILABILITY = frozenset(
    {
        "torch.cuda.is_available",
        "torch.cuda.device_count",
        "torch.cuda.is_initialized",
        "torch.backends.mps.is_available",
        "torch.mps.is_available",
        "torch.xpu.is_available",
        "torch.xpu.device_count",
        "torch.accelerator.is_available",
        "torch.accelerator.current_accelerator",
        "torch.accelerator.device_count",
    }
)
_AVAILABILITY_ATTRS = ("is_available", "device_count", "current_accelerator")


def is_device_string(value: object, *, cpu: bool = False) -> bool:
    """Whether a constant is an accelerator device string (``"cuda"``, ``"cuda:1"``, ``"mps"``).

    Examples:
        >>> is_device_string("cuda:0"), is_device_string("cpu"), is_device_string("cpu", cpu=True)
        (True, False, True)
    """
    if not isinstance(value, str):
        return False
    kind, _, index = value.partition(":")
    if kind not in ("cuda", "mps", "xpu", "npu", "hpu") and not (cpu and kind == "cpu"):
        return False
    return index == "" or index.isdigit()


class Context:
    """One module: its tree, source lines, imports, parents and the nodes the checks need."""

    def __init__(self, tree: ast.Module, source: str) -> None:
        self.tree = tree
        self.source = source
        self.parents: dict[ast.AST, ast.AST] = {}
        self.aliases: dict[str, str] = {}
        self.module_aliases: dict[str, str] = {}  # module-level imports only
        self.calls: list[ast.Call] = []
        self.attributes: list[ast.Attribute] = []
        self.classes: list[ast.ClassDef] = []
        self.device_strings = 0
        self.accelerator_kinds: set[str] = set()
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            kind = type(node)
            if kind is ast.Call:
                self.calls.append(node)  # type: ignore[arg-type]
            elif kind is ast.Attribute:
                self.attributes.append(node)  # type: ignore[arg-type]
            elif kind is ast.Constant:
                value = node.value  # type: ignore[attr-defined]
                if type(value) is str and is_device_string(value):
                    self.device_strings += 1
                    self.accelerator_kinds.add(value.partition(":")[0])
            elif kind is ast.ClassDef:
                self.classes.append(node)  # type: ignore[arg-type]
            elif kind is ast.Import or kind is ast.ImportFrom:
                self._add_import(node)  # type: ignore[arg-type]
        self.classes.sort(key=lambda c: (c.lineno, c.col_offset))

    # ---- names --------------------------------------------------------------------

    def _add_import(self, node: ast.Import | ast.ImportFrom) -> None:
        top = self.parents.get(node) is self.tree
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    bound, target = a.asname, a.name
                else:
                    bound = target = a.name.partition(".")[0]
                self.aliases[bound] = target
                if top:
                    self.module_aliases[bound] = target
        elif node.module and not node.level:
            for a in node.names:
                if a.name == "*":
                    continue
                bound = a.asname or a.name
                self.aliases[bound] = f"{node.module}.{a.name}"
                if top:
                    self.module_aliases[bound] = f"{node.module}.{a.name}"

    def qualname(self, node: ast.AST) -> str | None:
        """``torch.nn.DataParallel`` for ``nn.DataParallel`` (after ``from torch import nn``)."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.aliases.get(node.id)
        if root is None:
            return None
        parts.append(root)
        name = ".".join(reversed(parts))
        return _CANONICAL.get(name, name)

    def torch_alias(self) -> str | None:
        """The module-level name bound to ``torch`` itself (``torch``, ``th``), if any."""
        for bound, target in self.module_aliases.items():
            if target == "torch":
                return bound
        return None

    # ---- facts about the whole file -------------------------------------------------

    @cached_property
    def call_names(self) -> list[tuple[ast.Call, str | None]]:
        """Every call with its resolved callee (``None`` where it cannot be resolved)."""
        return [(c, self.qualname(c.func)) for c in self.calls]

    @cached_property
    def uses_accelerator(self) -> bool:
        """Whether the file places work on an accelerator at all.

        True when it names a device string (``"cuda"``, ``"mps"``, ...), calls ``.cuda()``
        or ``torch.cuda``/``torch.accelerator`` APIs, moves things ``.to(device)``, passes
        ``device=``, or uses Accelerate / Lightning, which place work for it.
        """
        if self.device_strings:
            return True
        for attr in self.attributes:
            if attr.attr in ("cuda", "accelerator", "device"):
                return True
        for call, name in self.call_names:
            if name and name.startswith(("accelerate.", "lightning", "pytorch_lightning")):
                return True
            if any(k.arg == "device" for k in call.keywords):
                return True
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "to":
                for arg in call.args[:1]:
                    if looks_like_device(arg):
                        return True
        return False

    @cached_property
    def checks_availability(self) -> bool:
        """Whether the file asks if CUDA (or another accelerator) is there."""
        return any(
            (attr.attr in _AVAILABILITY_ATTRS or self.qualname(attr) in _AVAILABILITY)
            and not self._guards_only_a_sync(attr)
            for attr in self.attributes
        )

    def _guards_only_a_sync(self, attr: ast.Attribute) -> bool:
        """``if torch.cuda.is_available(): torch.cuda.synchronize()`` (what TPL105's fix
        writes) guards a sync; it does not choose a device."""
        call = self.parents.get(attr)
        branch = self.parents.get(call) if isinstance(call, ast.Call) else None
        if not isinstance(branch, ast.If) or branch.test is not call or branch.orelse:
            return False
        return all(
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Call)
            and isinstance(s.value.func, ast.Attribute)
            and s.value.func.attr == "synchronize"
            for s in branch.body
        )

    @cached_property
    def sets_default_device(self) -> bool:
        """Whether the file calls ``torch.set_default_device`` (factories follow it)."""
        return any(
            name in ("torch.set_default_device", "torch.set_default_tensor_type")
            for _, name in self.call_names
        )

    # ---- structure ------------------------------------------------------------------

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        """The parents of ``node``, innermost first, up to the module."""
        parent = self.parents.get(node)
        while parent is not None:
            yield parent
            parent = self.parents.get(parent)

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function (or lambda, or class body) that contains ``node``, else the module."""
        for parent in self.ancestors(node):
            if isinstance(parent, _SCOPES):
                return parent
        return self.tree

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The innermost ``def`` that contains ``node``."""
        for parent in self.ancestors(node):
            if isinstance(parent, _FUNCS):
                return parent
        return None

    def is_main_guard(self, node: ast.AST) -> bool:
        """Whether ``node`` is ``if __name__ == "__main__":``."""
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            return False
        test = node.test
        sides = [test.left, *test.comparators]
        return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
            isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
        )

    def under_condition(self, node: ast.AST) -> bool:
        """Whether ``node`` runs only when some condition holds in its scope.

        True inside an ``if``/``else`` branch (not the ``__main__`` guard), a conditional
        expression branch, a later operand of ``and``/``or``, an ``except`` handler or a
        ``match`` case; the search stops at the enclosing ``def``.
        """
        child = node
        for parent in self.ancestors(node):
            if isinstance(parent, _SCOPES):
                return False
            if conditional_step(parent, child) and not self.is_main_guard(parent):
                return True
            child = parent
        return False


def conditional_step(parent: ast.AST, child: ast.AST) -> bool:
    """Whether ``child`` runs only under a condition that ``parent`` tests."""
    if isinstance(parent, ast.If):
        return child is not parent.test
    if isinstance(parent, ast.IfExp):
        return child is not parent.test
    if isinstance(parent, ast.BoolOp):
        return child is not parent.values[0]
    if isinstance(parent, (ast.ExceptHandler, ast.match_case)):
        return True
    if isinstance(parent, ast.Assert):
        return child is parent.msg
    if isinstance(parent, _LOOPS):
        return any(child is s for s in parent.orelse)
    if isinstance(parent, ast.Try):
        return any(child is s for s in parent.orelse)
    if isinstance(parent, ast.comprehension):
        return any(child is s for s in parent.ifs)
    return False


def looks_like_device(node: ast.AST) -> bool:
    """Whether an expression is plainly a device: ``"cuda"``, ``torch.device(...)``,
    ``x.device``, or a variable named ``device`` / ``*_device`` / ``device_*``.

    A bare name like ``dev`` or ``d`` is not enough: ``.to(d)`` may be a dtype.
    """
    if isinstance(node, ast.Constant):
        return is_device_string(node.value, cpu=True)
    if isinstance(node, ast.Call):
        func = node.func
        return isinstance(func, ast.Attribute) and func.attr == "device"
    name = None
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    if name is None:
        return False
    name = name.lower()
    return name == "device" or name.endswith("_device") or name.startswith("device_")
