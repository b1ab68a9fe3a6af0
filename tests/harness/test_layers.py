"""The harness's stages import one way: each package only from the packages before it in
STAGES (and the shared modules at the top of harness/, which import none of them), so a
reader finds a stage's inputs above it and nothing below it can change a verdict; and no
module of the harness or the engine reaches itself through its imports, within a package too."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

ROOT = REPO / "harness"
STAGES = ("results", "workload", "arms", "load", "stats", "runs", "sim", "report", "sweep",
          "bisect", "history", "adopt", "cli", "plugin")  # fmt: skip
SHARED = {"files", "escape", "names"}  # harness/*.py


def imports(path: Path) -> set[str]:
    """The harness modules `path` imports, at any depth (a late import counts too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}  # `from harness.x import y`
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("harness")}
    return out


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_every_stage_imports_only_from_the_stages_before_it():
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.name == "__main__.py":  # `python -m harness`: the CLI's door
            continue
        own = rel.parts[0] if len(rel.parts) > 1 else None
        for module in imports(path):
            other = stage_of(module)
            if own is None:  # a shared module imports no stage
                if other is not None:
                    wrong.append(f"{rel} -> {module}")
            elif other is not None and STAGES.index(other) > STAGES.index(own):
                wrong.append(f"{rel} -> {module}")
    assert wrong == []


def test_the_stages_are_the_packages():
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(STAGES)
    assert {p.stem for p in ROOT.glob("*.py")} - {"__init__", "__main__"} == SHARED


def module_graph(*roots: Path) -> dict[str, set[str]]:
    """module -> the modules of `roots` it imports: late imports and those under
    TYPE_CHECKING too (each is an edge a reader follows)."""
    names = {}
    for root in roots:
        for path in root.rglob("*.py"):
            rel = path.relative_to(root.parent).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            names[".".join(parts)] = path
    graph = {}
    for name, path in names.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in names and t != name}
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_of_the_harness_or_the_engine_imports_itself_in_a_circle():
    graph = module_graph(ROOT, REPO / "engine")
    assert len(graph) > 150
    assert cycles(graph) == []


def test_the_report_shows_records_and_neither_judges_nor_runs():
    # a view shows what the comparison computed once (stats) of what the runs recorded (runs)
    report = [(p, m) for p in sorted((ROOT / "report").glob("*.py")) for m in imports(p)]
    assert [f"{p.name} -> {m}" for p, m in report if stage_of(m) in ("stats", "runs")] == []
