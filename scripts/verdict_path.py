"""Follow a verdict from the statistics to the pull request's summary: run `harness compare A B`
with $GITHUB_STEP_SUMMARY set, in this process, under a line tracer and list the files of
harness/ whose executed lines read a verdict (`verdict` on the line), with how many such lines
ran in each.

    python scripts/verdict_path.py A.json B.json   # two saved results (A's runs as base)
"""

from __future__ import annotations

import linecache
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import harness as package
from harness.cli.main import main as harness

ROOT = Path(package.__file__).resolve().parent  # the harness imported: this tree's or another's


def follow(args: list[str]) -> Counter:
    lines: set[tuple[str, int]] = set()

    def tracer(frame, event, arg):
        path = frame.f_code.co_filename
        if not path.startswith(str(ROOT)):
            return None
        if event == "line" and "verdict" in linecache.getline(path, frame.f_lineno):
            lines.add((path, frame.f_lineno))
        return tracer

    sys.settrace(tracer)
    try:
        harness(args, standalone_mode=False)
    except SystemExit:
        pass
    finally:
        sys.settrace(None)
    return Counter(str(Path(p).relative_to(ROOT.parent)) for p, _ in lines)


def main() -> None:
    a, b = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as out:
        os.environ["GITHUB_STEP_SUMMARY"] = str(Path(out) / "summary.md")
        files = follow(["compare", a, b, "--out-dir", out])
        assert (Path(out) / "summary.md").exists(), "no summary written"
    print(f"{len(files)} files, {sum(files.values())} lines that read a verdict ran")
    for name, n in sorted(files.items()):
        print(f"{n:4d}  {name}")


if __name__ == "__main__":
    main()
