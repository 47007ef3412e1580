"""The shape rules of issue 22 (docs/ARCHITECTURE.md §2), checked over the product's syntax.

- An object's attributes are all set when it is built: no class assigns `self.x` outside its
  constructor (or its own class body, or a base class's constructor), so nothing is half-built
  between `__init__` and `start()` and no caller asks `hasattr`.
- No back-references: a method does not hand `self` to another class's constructor (the
  `CommandHandler` → `PinActions(self)` → `self.h.…` shape); a part gets the values or callables
  it uses.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "ingest")
CONSTRUCTORS = ("__init__", "__post_init__", "__new__")


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _self_targets(node: ast.AST) -> Iterator[tuple[str, int]]:
    """Each `self.x` a statement under `node` assigns, with its line."""
    for sub in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(sub, ast.Assign):
            targets = list(sub.targets)
        elif isinstance(sub, ast.AnnAssign | ast.AugAssign):
            targets = [sub.target]
        while targets:  # `self.x = …` and `self.x, y = …`; not `self.x[k] = …` (a mutation)
            target = targets.pop()
            if isinstance(target, ast.Tuple | ast.List):
                targets += target.elts
            elif isinstance(target, ast.Starred):
                targets.append(target.value)
            elif (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                yield target.attr, target.lineno


def _declared(cls: ast.ClassDef) -> set[str]:
    """What a class body declares and its constructors set."""
    names: set[str] = set()
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if stmt.name in CONSTRUCTORS:
                names |= {name for name, _ in _self_targets(stmt)}
            elif any(
                (d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", ""))
                in ("property", "cached_property")
                for d in stmt.decorator_list
            ):
                names.add(stmt.name)
    return names


@cache
def _declared_by(klass: type) -> frozenset[str]:
    """What a (base) class declares, read from its source; nothing where it has none."""
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):
        return frozenset(getattr(klass, "__slots__", ()))
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    return frozenset(_declared(cls) | set(getattr(klass, "__slots__", ())))


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_class_sets_an_attribute_outside_its_constructor() -> None:
    late: list[str] = []
    for path, tree in _modules():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            klass = getattr(importlib.import_module(_module_name(path)), cls.name, None)
            known = _declared(cls)
            if isinstance(klass, type):
                for base in klass.__mro__[1:]:
                    known |= _declared_by(base)
            for method in cls.body:
                if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if method.name in CONSTRUCTORS:
                    continue
                late += [
                    f"{path.relative_to(ROOT)}:{line} {cls.name}.{name} (first set in "
                    f"{method.name})"
                    for name, line in _self_targets(method)
                    if name not in known
                ]
    assert not late, "attributes set outside the constructor:\n" + "\n".join(late)


def _passes_self(call: ast.Call) -> bool:
    values = [*call.args, *(k.value for k in call.keywords)]
    return any(isinstance(v, ast.Name) and v.id == "self" for v in values)


def _constructor_name(func: ast.expr) -> str | None:
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name if name and name.lstrip("_")[:1].isupper() else None


def test_no_part_is_handed_a_back_reference() -> None:
    handed: list[str] = []
    for path, tree in _modules():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for call in (n for n in ast.walk(cls) if isinstance(n, ast.Call)):
                name = _constructor_name(call.func)
                if name and _passes_self(call):
                    handed.append(f"{path.relative_to(ROOT)}:{call.lineno} {cls.name} → {name}")
    assert not handed, "a class handed `self` to another's constructor:\n" + "\n".join(handed)


def test_no_feature_detection_on_half_built_objects() -> None:
    asked = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "hasattr"
        and node.args
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "self"
    ]
    assert not asked, "hasattr(self, …) asks whether an object is built:\n" + "\n".join(asked)
