"""The harness on its own: no module of it imports torch, MLX or the engine, and a wheel carries
the shipped suites and templates, so an install that is not editable runs an A/B of two command
arms from a folder that is no git repository."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import REPO
from helpers.arms import scripted
from helpers.cli import exit_agrees
from helpers.processes import unique_marker, wait_no_survivors

HEAVY = ("torch", "mlx", "engine")
IMPORT_ALL = """
import importlib, json, pkgutil, sys
import harness
for m in pkgutil.walk_packages(harness.__path__, "harness."):
    if not m.name.endswith("__main__"):
        importlib.import_module(m.name)
print(json.dumps(sorted(k for k in sys.modules if k.split(".")[0] in {heavy})))
"""


def test_no_harness_module_imports_torch_mlx_or_the_engine():
    code = IMPORT_ALL.format(heavy=set(HEAVY))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_each_array_library_is_imported_only_in_its_own_backend_room():
    """torch in backends/torch and backends/kernels (its cpp_extension builds them), mlx in
    backends/mlx; nothing else in the engine imports either."""
    rooms = {"torch": {"torch", "kernels"}, "mlx": {"mlx"}}
    engine = REPO / "engine"
    for path in engine.rglob("*.py"):
        parts = path.relative_to(engine).parts
        room = parts[1] if parts[0] == "backends" and len(parts) > 2 else None
        for lib in _imported_roots(path) & set(rooms):
            assert room in rooms[lib], f"{path.relative_to(REPO)} imports {lib}"
    assert {p.name for p in (engine / "backends").iterdir() if p.suffix in (".cpp", ".h")} == set()


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> Path:
    """A new venv holding the built wheel; its dependencies are borrowed from this venv's
    site-packages by a path entry (so this venv's editable install stays out of it)."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(root / "dist")],
        check=True, capture_output=True, cwd=root,
    )  # fmt: skip
    (wheel,) = (root / "dist").glob("servegate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {"harness/_data/suites/smoke.toml", "harness/_data/templates/report.md.j2"}
    shipped.add("engine/backends/kernels/csrc/cpu_decode.cpp")
    shipped |= {"engine/sim/data/hardware.toml", "engine/sim/data/shapes/llama-3-8b.json"}
    assert shipped <= set(names)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    (site,) = (root / "venv" / "lib").glob("python*/site-packages")
    zipfile.ZipFile(wheel).extractall(site)
    deps = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "borrowed-deps.pth").write_text(deps + "\n")
    return root


RUN_HARNESS = """
import runpy, sys
sys.argv = ["harness", *sys.argv[1:]]
try:
    runpy.run_module("harness", run_name="__main__")
except SystemExit as e:
    loaded = sorted(k for k in sys.modules if k.split(".")[0] in {heavy})
    print("heavy modules:", loaded, "harness from:", sys.modules["harness"].__file__)
    raise
"""


def test_a_wheel_runs_an_ab_of_two_commands_outside_any_repository(wheel_env, tmp_path):
    python = wheel_env / "venv" / "bin" / "python"
    marker = unique_marker()
    code = RUN_HARNESS.format(heavy=set(HEAVY))
    r = subprocess.run(
        [str(python), "-c", code, "ab", "--suite", "smoke", "--quiet", "--rounds", "2",
         "--max-rounds", "2", "--base-cmd", scripted(model=marker),
         "--head-cmd", scripted("--tag b", model=marker)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={"GIT_CEILING_DIRECTORIES": str(tmp_path.parent), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    saved = list((tmp_path / "results").glob("*-smoke-*.json"))
    assert len(saved) == 1, r.stdout + r.stderr
    exit_agrees(r, json.loads(saved[0].read_text()))  # an A/A on real timings: any verdict
    assert "heavy modules: [] harness from: " + str(wheel_env / "venv" / "lib") in r.stdout
    assert len(list((tmp_path / "results").glob("*-smoke-*.md"))) == 1
    assert not wait_no_survivors(marker)


def test_the_wheel_registers_the_pytest_plugin(wheel_env):
    """pytest finds the `servegate` fixture through the wheel's pytest11 entry point."""
    (wheel,) = (wheel_env / "dist").glob("servegate-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (eps,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        text = z.read(eps).decode()
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        extras = z.read(meta).decode()
    assert "[pytest11]\nservegate = servegate_pytest\n" in text
    assert {"servegate_pytest.py", "harness/plugin/servegate.py"} <= set(names)
    assert "Provides-Extra: pytest" in extras
    assert 'Requires-Dist: pytest-benchmark>=4; extra == "pytest"' in extras
    assert not any(line.startswith("Requires-Dist: torch") and "extra" not in line
                   for line in extras.splitlines())  # fmt: skip
