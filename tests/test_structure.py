"""The shape rules of issue 22 (docs/ARCHITECTURE.md §2), checked over the product's syntax.

- An object's attributes are all set when it is built: no class assigns `self.x` outside its
  constructor (or its own class body, or a base class's constructor), so nothing is half-built
  between `__init__` and `start()` and no caller asks `hasattr`.
- No back-references: a method does not hand `self` to another class's constructor (the
  `CommandHandler` → `PinActions(self)` → `self.h.…` shape); a part gets the values or callables
  it uses.
- No import loop anywhere in the tree (issue 45), every import counted, those inside a function
  too: `lint-imports` holds the floors and the siblings, this holds a module and its own
  package's `__init__` as well.
- Rooms a newcomer can name (issue 45): a folder of bot/, ingest/ or bench/ holds at most 15
  modules beside its `__init__`, none excepted, and a module at most 400 lines.
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


TREE = ("bot", "ingest", "bench", "tests")


def _import_graph() -> dict[str, dict[str, tuple[Path, int]]]:
    """Each module of the tree → the modules of the tree it names in an import, with where.

    Every import statement counts, at the top, inside a function or under `TYPE_CHECKING`: a
    loop closed by an import inside a function still runs half-built the day the order of first
    imports changes. `from pkg import name` names `pkg.name` where that is a module, else
    `pkg` itself (its `__init__`); the parent packages Python runs first on the way to a module
    are not counted (they are already running when one of their own modules is imported).
    """
    paths = {
        _module_name(path): path
        for top in TREE
        for path in sorted((ROOT / top).rglob("*.py"))
        if "fixtures" not in path.relative_to(ROOT).parts
    }

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, tuple[Path, int]]] = {name: {} for name in paths}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = here
                    for _ in range(node.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}" if base else package
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else known(base)
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                if target and target != name:
                    graph[name].setdefault(target, (path, node.lineno))
    return graph


def _loops(graph: dict[str, dict[str, tuple[Path, int]]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in graph[name]:
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = [stack.pop()]
            while component[-1] != name:
                component.append(stack.pop())
            if len(component) > 1:
                loops.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return loops


def test_no_import_loop_anywhere_in_the_tree() -> None:
    """No module of bot/, ingest/, bench/ or tests/ reaches itself again through its imports.

    The `acyclic_siblings` contract of `lint-imports` sees loops between siblings only, so a
    module importing its own package's `__init__` while that `__init__` imports it (in a
    function, even) passed it: `ingest/embed/pair.py` took `Embedder` from `ingest.embed`,
    whose `make_embedder` imports `ingest.embed.pair` (the protocol now lives in
    `ingest/embed/base.py`). This check names that loop on the tree before (6abe00a~1).
    """
    graph = _import_graph()
    found = [
        " ↔ ".join(loop)
        + "".join(
            f"\n    {source} → {target} ({where.relative_to(ROOT)}:{line})"
            for source in loop
            for target, (where, line) in graph[source].items()
            if target in loop
        )
        for loop in _loops(graph)
    ]
    assert not found, "import loops:\n" + "\n".join(found)


def test_a_module_logs_under_its_rooms_name() -> None:
    """One logger naming scheme (issue 45): a module of `bot/ROOM/` or `ingest/ROOM/` logs under
    `muninn.ROOM`, so an operator filters a room's lines by one name and a module that moves
    takes the name of the room it moves to (`bot/chat/searching.py` kept `muninn.lookup`)."""
    named = [  # `getLogger()`, the root logger, is the log setup's own
        (path.relative_to(ROOT), call.lineno, ast.literal_eval(call.args[0]))
        if isinstance(call.args[0], ast.Constant)
        else (path.relative_to(ROOT), call.lineno, ast.unparse(call.args[0]))
        for path, tree in _modules()
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "getLogger"
        and call.args
    ]
    wrong = [
        f"{where}:{line} {name!r} (its room: 'muninn.{where.parts[1]}')"
        for where, line, name in named
        if len(where.parts) < 3 or name != f"muninn.{where.parts[1]}"
    ]
    assert named and not wrong, "loggers outside their room's name:\n" + "\n".join(wrong)


MAX_MODULES = 15  # modules a folder holds beside its `__init__` (docs/ARCHITECTURE.md §2.1)
MAX_LINES = 400  # lines a module holds


def test_a_folder_holds_at_most_fifteen_modules_and_a_module_at_most_400_lines() -> None:
    """A room a newcomer can name holds a handful of modules, each readable in one sitting."""
    crowded = []
    long = []
    for top in ("bot", "ingest", "bench"):
        for folder in sorted(p for p in (ROOT / top).rglob("*") if p.is_dir()):
            if folder.name == "__pycache__" or "fixtures" in folder.parts:
                continue
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            where = str(folder.relative_to(ROOT))
            if len(modules) > MAX_MODULES:
                crowded.append(f"{where}: {len(modules)} modules")
            long += [
                f"{p.relative_to(ROOT)}: {n} lines"
                for p in modules
                if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
            ]
    assert not crowded, f"folders over {MAX_MODULES} modules:\n" + "\n".join(crowded)
    assert not long, f"modules over {MAX_LINES} lines:\n" + "\n".join(long)
