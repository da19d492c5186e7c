"""The simulator's import graph stays acyclic and layered (docs/internals/architecture.md).

Every module of ``torchplace.sim`` belongs to one part; a part may import from the parts
below it and from itself, never from a part above. Imports inside functions count like
any other: a function-level import that hides a cycle is still a cycle. Imports under
``if TYPE_CHECKING:`` (annotations only: nothing runs them) may name a module of the same
part in either direction, but never one of a part above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import torchplace.sim

SIM = Path(torchplace.sim.__file__).parent
PACKAGE = "torchplace.sim"

#: the parts, lowest first
PARTS = ["accounting", "rules", "reporting", "emulation", "planning"]

#: top-level module -> part; a module in a subpackage named after a part (``accounting/``,
#: ``rules/``, ``emulation/``) belongs to that part. The top level holds the public modules
#: and the few private ones that serve them.
MODULES = {
    "allocator": "accounting",  # public: the caching allocator model
    # reporting: the report, its tables, the timeline, the HTML page, the snapshot format
    "report": "reporting",
    "summary": "reporting",
    "timeline": "reporting",
    "html": "reporting",
    "snapshot": "reporting",
    "_advice": "reporting",
    # planning: whole scripts in child processes, replay on other GPUs, the largest size
    "plan": "planning",
    "search": "planning",
    "planning": "planning",
    "_values": "planning",
    "_child": "planning",
    "example": "planning",
    "": "planning",  # the package itself: its lazy exports reach every part
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in SIM.rglob("*.py"):
        parts = list(path.relative_to(SIM).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, known: set[str]) -> list[tuple[str, bool, int]]:
    """(imported sim module, annotation only, line) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    annotation_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for inner in node.body:
                annotation_lines.update(range(inner.lineno, (inner.end_lineno or 0) + 1))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = f"{PACKAGE}.{name}".rstrip(".").split(".")
                base = base if is_package else base[:-1]
                kept = base[: len(base) - node.level + 1]
                module = ".".join(kept + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" for alias in node.names] + [module]
        for target in targets:
            if not target.startswith(PACKAGE + ".") and target != PACKAGE:
                continue
            rel = target[len(PACKAGE) + 1 :]
            while rel and rel not in known:
                rel = rel.rpartition(".")[0]
            if rel != name:
                found.append((rel, node.lineno in annotation_lines, node.lineno))
                break  # ``from pkg import mod``: the module, not the package as well
    return found


def _part(module: str) -> str:
    head = module.split(".")[0]
    if head in PARTS:
        return head
    assert module in MODULES, (
        f"torchplace.sim.{module} belongs to no part: add it to MODULES in {__file__} and "
        "to the layout in docs/internals/architecture.md"
    )
    return MODULES[module]


def _graph() -> dict[str, list[tuple[str, bool, int]]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def test_every_module_has_a_part_and_no_part_imports_one_above_it() -> None:
    wrong = []
    for name, imports in _graph().items():
        own = PARTS.index(_part(name))
        for target, _, line in imports:
            if PARTS.index(_part(target)) > own:
                wrong.append(f"{name}:{line} ({_part(name)}) imports {target} ({_part(target)})")
    assert not wrong, "lower parts import upper ones:\n" + "\n".join(wrong)


def test_the_import_graph_is_acyclic() -> None:
    graph = {
        name: sorted({t for t, annotation, _ in imports if not annotation})
        for name, imports in _graph().items()
    }
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> None:
        if name in path:
            cycle = [*path[path.index(name) :], name]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        path.append(name)
        for target in graph[name]:
            visit(target)
        path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    """The parser finds the imports a cycle could hide in: inside functions, relative,
    ``from torchplace.sim import x``, and tells annotation-only ones apart."""
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from torchplace.sim.report import SimReport\n"
        "def f():\n"
        "    from torchplace.sim.accounting import _state\n"
        "    from torchplace.sim import allocator\n"
        "    from . import summary\n"
        "    import torchplace.sim.accounting._trace\n"
    )
    known = {"report", "accounting", "accounting._state", "accounting._trace", "allocator"}
    found = sorted((t, a) for t, a, _ in _imports("mod", source, known | {"summary", "mod"}))
    assert found == [
        ("accounting._state", False),
        ("accounting._trace", False),
        ("allocator", False),
        ("report", True),
        ("summary", False),
    ]
    assert _part("accounting._state") == "accounting" and _part("allocator") == "accounting"
