"""The harness's stages import one way: each package only from the packages before it in
STAGES (and the shared modules at the top of harness/, which import none of them), so a
reader finds a stage's inputs above it and nothing below it can change a verdict."""

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
