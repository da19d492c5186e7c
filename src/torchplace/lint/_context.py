"""What the checks know about one parsed module: names, parents, loops, classes.

Built in one walk over Python's own ``ast``. Names are resolved through the module's
imports only (``import torch as th`` makes ``th.load`` ``torch.load``); a name that no
import binds resolves to ``None``, and the checks then stay silent.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Iterator
from functools import cached_property

__all__ = ["Context", "is_device_string", "name_tokens"]

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

# words in a name that say "GPU" (split at _, . and case changes: onlyCUDA, min_cuda_gpus)
_GPU_TOKENS = frozenset({"cuda", "gpu", "gpus", "cudnn", "nccl", "triton", "multigpu"})
# languages for writing GPU kernels: a file that imports one at the top is GPU code
_GPU_KERNEL_MODULES = frozenset({"triton", "cutlass", "cuda", "cupy", "pycuda"})
# torch.cuda calls that run without CUDA (everything else there needs a device)
_CUDA_SAFE_PREFIXES = (
    "is_",
    "device_count",
    "manual_seed",
    "seed",
    "initial_seed",
    "empty_cache",
    "memory",
    "max_memory",
    "reset_",
    "amp",
    "set_rng_state",
    "get_arch_list",
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_tokens(name: str) -> set[str]:
    """The words of an identifier, lower-cased: ``onlyCUDA`` -> ``{"only", "cuda"}``.

    Examples:
        >>> sorted(name_tokens("_RunIf")), sorted(name_tokens("min_cuda_gpus"))
        (['if', 'run'], ['cuda', 'gpus', 'min'])
    """
    return {w.lower() for w in _WORD.findall(name)}


def tokens_of(expr: ast.AST, *, strings: bool = False) -> set[str]:
    """The words of every name, attribute and keyword argument in an expression; with
    ``strings``, of its names, attributes and string constants instead (``args.resume``,
    ``f"{out}/ckpt_{step}.pt"``)."""
    words: set[str] = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            words |= name_tokens(node.id)
        elif isinstance(node, ast.Attribute):
            words |= name_tokens(node.attr)
        elif not strings and isinstance(node, ast.keyword) and node.arg:
            words |= name_tokens(node.arg)
        elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str):
            words |= name_tokens(node.value)
    return words


def _gpu_named_call(call: ast.Call) -> bool:
    """A call of a function named for a GPU (``benchmark_cuda_function(...)``,
    ``triton_quantize(...)``), not a question (``has_triton()``, ``is_cuda_graph``)."""
    func = call.func
    name = _last_name(func)
    if not name or (isinstance(func, ast.Attribute) and name in ("cuda", "to")):
        return False
    words = _WORD.findall(name)
    return (
        bool(words)
        and words[0].lower() not in ("has", "is", "can", "supports", "check", "require", "requires")
        and bool({w.lower() for w in words} & _GPU_TOKENS)
    )


def _skips(tokens: set[str]) -> bool:
    """Whether the words name a skip (``skipif``, ``skipUnless``, ``importorskip``)."""
    return any("skip" in t for t in tokens)


def _last_name(node: ast.AST) -> str:
    """``assertEqual`` for ``self.assertEqual``, ``TestCase`` for ``unittest.TestCase``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _walk_local(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node under ``nodes``, not descending into nested functions or classes."""
    stack = list(nodes)[::-1]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


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

    def __init__(self, tree: ast.Module, source: str, path: str = "<string>") -> None:
        self.tree = tree
        self.source = source
        self.path = path
        self.parents: dict[ast.AST, ast.AST] = {}
        self.aliases: dict[str, str] = {}
        self.module_aliases: dict[str, str] = {}  # module-level imports only
        self.calls: list[ast.Call] = []
        self.attributes: list[ast.Attribute] = []
        self.classes: list[ast.ClassDef] = []
        self.withs: list[ast.With | ast.AsyncWith] = []
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
            elif kind is ast.With or kind is ast.AsyncWith:
                self.withs.append(node)  # type: ignore[arg-type]
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
        if any(
            target.startswith(("accelerate", "lightning", "pytorch_lightning"))
            for target in self.aliases.values()
        ):
            return True  # these frameworks put the model on the accelerator
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

    # ---- what the code is for: tests, GPU-only code, fake tensors ---------------------
    #
    # Each answers "could the rule's problem happen when this code runs as its authors
    # intend?" from what the file itself says, never from a list of projects or helpers.

    @cached_property
    def test_file(self) -> bool:
        """Whether the file is test code: named as pytest collects tests (``test_*.py``,
        ``*_test.py``, ``conftest.py``) or in a ``tests``/``test``/``testing`` folder of
        the project (its path as given, relative to the folder linted)."""
        *folders, name = self.path.replace("\\", "/").split("/")
        if name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py":
            return True
        return any(f in ("test", "tests", "testing") for f in folders)

    def in_test(self, node: ast.AST) -> bool:
        """Whether ``node`` is test code: in a test module, a ``test_*`` function, a
        ``Test*`` class or a ``unittest.TestCase`` subclass (its ``setUp`` too)."""
        if self.test_file:
            return True
        for parent in self.ancestors(node):
            if isinstance(parent, _FUNCS) and parent.name.startswith("test_"):
                return True
            if isinstance(parent, ast.ClassDef) and (
                parent.name.startswith("Test")
                or any(_last_name(b).endswith("TestCase") for b in parent.bases)
            ):
                return True
        return False

    def gpu_only(self, node: ast.AST) -> bool:
        """Whether ``node`` runs only where a GPU is, by its authors' design.

        The whole file is (:attr:`gpu_only_file`), or a function or class around ``node``
        is: decorated with a skip (``pytest.mark.skipif``, ``unittest.skipUnless``, any
        decorator named ``*skip*``) or with a decorator that names a GPU
        (``@requires_cuda``, ``@onlyCUDA``, ``_RunIf(min_cuda_gpus=1)``), named for one
        (``test_matmul_cuda``, ``def cuda(self)``), calling a CUDA-only ``torch.cuda`` API
        unconditionally (``torch.cuda.set_device``, ``Event``, ``synchronize``), or
        leaving early before ``node`` when a GPU is missing
        (``if not has_triton(): return``, ``pytest.skip(...)``, ``self.skipTest(...)``).
        """
        if self.gpu_only_file:
            return True
        child = node
        for parent in self.ancestors(node):
            if isinstance(parent, (*_FUNCS, ast.ClassDef)):
                if self._gpu_only_scope(parent):
                    return True
                if isinstance(parent, _FUNCS) and self._guarded_before(parent.body, child):
                    return True
            child = parent
        return False

    @cached_property
    def gpu_only_file(self) -> bool:
        """Whether the file runs only with a GPU by design: it imports a GPU kernel
        language (``triton``, ``cutlass``, CUDA Python, CuPy, PyCUDA) at the top, marks
        every test with a skip or GPU mark (``pytestmark``), stops at the top when no GPU
        is there (``if not torch.cuda.is_available(): sys.exit(...)``, a module-level
        ``pytest.skip``, ``assert torch.cuda.is_available()``), or calls a CUDA-only
        ``torch.cuda`` API, NCCL or a function named for a GPU unconditionally anywhere;
        or its name says GPU (``test_triton_mm.py``)."""
        stem = os.path.splitext(os.path.basename(self.path))[0]
        if name_tokens(stem) & _GPU_TOKENS:
            return True  # test_triton_mm.py, bench_cuda_graphs.py
        for stmt in self._top_statements():
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                modules = (
                    [a.name for a in stmt.names]
                    if isinstance(stmt, ast.Import)
                    else [stmt.module or ""]
                )
                if any(m.partition(".")[0] in _GPU_KERNEL_MODULES for m in modules):
                    return True
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                marks = tokens_of(stmt.value)
                if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets) and (
                    marks & _GPU_TOKENS or _skips(marks)
                ):
                    return True
            if self._guard_statement(stmt):
                return True
        return any(
            (self._cuda_only_call(call, name) or _gpu_named_call(call))
            and not self.conditional_in(call, self.tree)
            for call, name in self.call_names
        )

    @cached_property
    def _module_values(self) -> dict[str, ast.expr]:
        """Names assigned once at module level, with their values."""
        values: dict[str, ast.expr] = {}
        for stmt in self.tree.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                values[stmt.targets[0].id] = stmt.value
        return values

    def module_constant(self, name: str) -> ast.expr | None:
        """The constant a module-level name is bound to once (``DEVICE = "cuda"``), if it
        is never re-bound anywhere in the file."""
        value = self._module_values.get(name)
        if not isinstance(value, ast.Constant) or name in self._rebound:
            return None
        return value

    @cached_property
    def _rebound(self) -> set[str]:
        """Names bound more than once in the file (any scope), or declared global."""
        seen: set[str] = set()
        twice: set[str] = set()
        for node in ast.walk(self.tree):
            names: list[str] = []
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names = [node.id]
            elif isinstance(node, ast.Global):
                twice.update(node.names)
            for n in names:
                (twice if n in seen else seen).add(n)
        return twice

    def _top_statements(self) -> Iterator[ast.stmt]:
        """The module's statements, with those of its ``if __name__ == "__main__":``."""
        for stmt in self.tree.body:
            yield stmt
            if self.is_main_guard(stmt):
                yield from stmt.body  # type: ignore[attr-defined]

    def _gpu_only_scope(self, scope: ast.AST) -> bool:
        cache = self._scope_cache
        if scope not in cache:
            cache[scope] = self._gpu_only_scope_uncached(scope)
        return cache[scope]

    @cached_property
    def _scope_cache(self) -> dict[ast.AST, bool]:
        return {}

    def _gpu_only_scope_uncached(self, scope: ast.AST) -> bool:
        assert isinstance(scope, (*_FUNCS, ast.ClassDef))
        if name_tokens(scope.name) & _GPU_TOKENS:
            return True
        for decorator in scope.decorator_list:
            tokens = tokens_of(decorator)
            bound = (
                self._module_values.get(decorator.id) if isinstance(decorator, ast.Name) else None
            )
            if bound is not None:  # requires_gpu = pytest.mark.skipif(...); @requires_gpu
                tokens |= tokens_of(bound)
            if tokens & _GPU_TOKENS or _skips(tokens):
                return True
        if isinstance(scope, ast.ClassDef):
            # unittest: a setUp that skips guards every test of the class
            return any(
                isinstance(m, _FUNCS)
                and m.name.lower().startswith("setup")
                and any(self._guard_statement(s) for s in m.body)
                for m in scope.body
            )
        return any(
            isinstance(n, ast.Call)
            and self._cuda_only_call(n, self.qualname(n.func))
            and not self.conditional_in(n, scope)
            for n in _walk_local(scope.body)
        )

    def _guarded_before(self, body: list[ast.stmt], child: ast.AST) -> bool:
        """Whether a statement of ``body`` before ``child`` leaves when no GPU is there."""
        for stmt in body:
            if stmt is child:
                return False
            if self._guard_statement(stmt):
                return True
        return False

    def _guard_statement(self, stmt: ast.stmt) -> bool:
        """``if <no GPU>: return/raise/exit/skip``, ``assert <GPU>``, or a bare skip call
        such as ``pytest.skip(..., allow_module_level=True)`` / ``pytest.importorskip``."""
        if isinstance(stmt, ast.Assert):
            return self._mentions_gpu(stmt.test)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return _skips(tokens_of(stmt.value.func))
        if not isinstance(stmt, ast.If) or not stmt.body:
            return False
        last = stmt.body[-1]
        if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
            tokens = tokens_of(last.value.func)
            if _skips(tokens):
                return True  # a test that skips under a condition runs only when it holds
            leaves = bool(tokens & {"exit", "quit"})
        else:
            leaves = isinstance(last, (ast.Return, ast.Raise, ast.Continue))
        return leaves and self._mentions_gpu(stmt.test)

    def _mentions_gpu(self, expr: ast.AST) -> bool:
        """Whether a condition asks about a GPU: an availability API, or a name that says
        GPU/CUDA/Triton (``has_triton()``, ``args.cuda``, ``is_sm_at_least_90``)."""
        if tokens_of(expr) & (_GPU_TOKENS | {"sm"}):
            return True
        return any(
            isinstance(n, ast.Attribute)
            and (n.attr in _AVAILABILITY_ATTRS or self.qualname(n) in _AVAILABILITY)
            for n in ast.walk(expr)
        )

    def _cuda_only_call(self, call: ast.Call, name: str | None) -> bool:
        """A call that needs a CUDA device: ``torch.cuda.*`` other than the availability
        checks and the calls that work without CUDA (seeding, memory statistics,
        ``empty_cache``, ``amp``), or a NCCL process group."""
        if name is not None and name.startswith("torch.cuda."):
            first = name[len("torch.cuda.") :].partition(".")[0]
            return not first.startswith(_CUDA_SAFE_PREFIXES)
        for k in call.keywords:
            if k.arg == "backend" and isinstance(k.value, ast.Constant) and k.value.value == "nccl":
                return True
        return False

    def conditional_in(self, node: ast.AST, scope: ast.AST) -> bool:
        """Whether ``node`` runs under a condition (or a ``try``) inside ``scope``."""
        child = node
        for parent in self.ancestors(node):
            if parent is scope:
                return False
            if conditional_step(parent, child) or isinstance(parent, ast.Try):
                return True
            child = parent
        return False

    def in_fake_mode(self, node: ast.AST) -> bool:
        """Whether ``node`` runs where tensors have no data: inside ``with`` a fake or
        meta mode (``FakeTensorMode()``, ``fake_mode``, ``torch.device("meta")``)."""
        fake = self._fake_withs
        return bool(fake) and any(a in fake for a in self.ancestors(node))

    @cached_property
    def _fake_withs(self) -> set[ast.AST]:
        found: set[ast.AST] = set()
        for with_node in self.withs:
            for item in with_node.items:
                expr = item.context_expr
                tokens = tokens_of(expr.func if isinstance(expr, ast.Call) else expr)
                meta = isinstance(expr, ast.Call) and any(
                    isinstance(a, ast.Constant) and a.value == "meta" for a in expr.args
                )
                if meta or tokens & {"fake", "meta"}:
                    found.add(with_node)
        return found

    def expected_value(self, node: ast.AST) -> bool:
        """Whether ``node`` is a value compared against, not a placement: inside a
        comparison, an ``assert`` or a ``self.assert*(...)`` call."""
        for parent in self.ancestors(node):
            if isinstance(parent, (ast.Compare, ast.Assert)):
                return True
            if isinstance(parent, ast.Call) and _last_name(parent.func).startswith("assert"):
                return True
            if isinstance(parent, (ast.stmt, *_SCOPES)):
                return False
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
