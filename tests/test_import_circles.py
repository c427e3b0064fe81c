"""No import circle inside or between ingest/, profiler/ and app/ (lazy imports inside functions count;
TYPE_CHECKING ones do not)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"ingest": "portscope.ingest", "profiler": "portscope.profiler", "app": "portscope.app"}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            out[".".join((package, *parts)).removesuffix(".__init__")] = path
    return out


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> modules it imports; package __init__ files are left out (they only re-export)."""
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = ".".join(base[: len(base) - node.level + 1] + [node.module or ""]).rstrip(".") \
                    if node.level else (node.module or "")
                candidates = [target, *(f"{target}.{a.name}" for a in node.names)]
            else:
                candidates = [a.name for a in node.names]
            edges[name] |= {c for c in candidates if c in modules and c != name and modules[c].name != "__init__.py"}
    return edges


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_package_is_scanned() -> None:
    modules = _modules()
    assert {m.split(".")[1] for m in modules} == {"ingest", "profiler", "app"}
    assert "portscope.app.pages.region" in modules and "portscope.ingest.readers.kineto" in modules


def test_no_import_circles_in_ingest_profiler_or_app() -> None:
    assert _circles(_edges(_modules())) == []


def _private_imports(modules: dict[str, Path]) -> list[str]:
    """Imports of a private (`_name`) module or name that lives outside the importing module's own package."""
    found = []
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                source = package[: len(package) - node.level + 1] + (node.module or "").split(".") if node.level \
                    else (node.module or "").split(".")
                targets = [[*filter(None, source), a.name] for a in node.names]
            else:
                targets = [a.name.split(".") for a in node.names]
            for target in targets:
                if target[0] != "portscope":
                    continue
                for i, part in enumerate(target):
                    if part.startswith("_") and not part.startswith("__") and target[:i] != package:
                        found.append(f"{name} imports {'.'.join(target)}")
                        break
    return sorted(found)


def test_the_private_import_finder_finds_them(tmp_path: Path) -> None:
    lines = {
        "a.py": "from portscope.ingest._outer import x\nfrom portscope.ingest import spill\nfrom ._own import w\n",
        "b.py": "from ._own import y\nfrom .._sibling import z\nimport portscope.ingest._hidden\n",
        "c.py": "from portscope.ingest.trace import _name\nfrom portscope.ingest.trace import __version__\n",
    }
    for file, text in lines.items():
        (tmp_path / file).write_text(text)
    modules = {f"portscope.ingest.readers.{f[0]}": tmp_path / f for f in lines}
    assert sorted(_private_imports(modules)) == [  # a module of the same package may import a private one
        "portscope.ingest.readers.a imports portscope.ingest._outer.x",
        "portscope.ingest.readers.b imports portscope.ingest._hidden",
        "portscope.ingest.readers.b imports portscope.ingest._sibling.z",
        "portscope.ingest.readers.c imports portscope.ingest.trace._name",
    ]


def test_no_module_imports_another_packages_private_names() -> None:
    modules = _modules()
    for folder in ("bench", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            modules[".".join((folder, *path.relative_to(REPO / folder).with_suffix("").parts))] = path
    assert _private_imports(modules) == []
