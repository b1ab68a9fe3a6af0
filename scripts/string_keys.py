"""Count the string-key reads in harness/: `x["key"]` (a load, not a store) and
`x.get("key")`, `.pop("key")`, `.setdefault("key")`. A read is result-shaped when its key is a
key of some saved result under results/ (an A/B, sweep, bisect or run JSON, walked to any
depth): the reads the records in harness/results/ are there to replace.

    python scripts/string_keys.py [REPO]   # prints the totals and the top files
"""

from __future__ import annotations

import ast
import json
import sys
from collections import Counter
from pathlib import Path

READS = ("get", "pop", "setdefault")


def result_keys(repo: Path) -> set[str]:
    keys: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            keys.update(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node[:20]:
                walk(item)

    for path in (repo / "results").rglob("*.json"):
        doc = json.loads(path.read_text())
        if isinstance(doc, list) or str(doc.get("schema", "")).startswith("servegate."):
            walk(doc)
    return keys


def read_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        key = node.slice
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in READS
        and node.args
    ):
        key = node.args[0]
    else:
        return None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def count(repo: Path) -> tuple[Counter, Counter]:
    keys, every, shaped = result_keys(repo), Counter(), Counter()
    for path in sorted((repo / "harness").rglob("*.py")):
        name = path.relative_to(repo).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if (key := read_key(node)) is not None:
                every[name] += 1
                shaped[name] += key in keys
    return every, shaped


def main() -> None:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    every, shaped = count(repo)
    print(f"string-key reads: {sum(every.values())}, result-shaped: {sum(shaped.values())}")
    for name, n in shaped.most_common(10):
        print(f"{n:5d}  {name}")


if __name__ == "__main__":
    main()
