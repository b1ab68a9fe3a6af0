"""This checkout's tracked files as a new git repository, to commit seeded history on."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from helpers import REPO, git

TIGHT_CAP = (  # the seed's boundary regression: the prefill token cap re-derived as mbp*chunk
    "return 2 * max_batch_prefill * prefill_chunk_size",
    "return max_batch_prefill * prefill_chunk_size",
)


class ThrowawayRepo:
    """This checkout's tracked files as a new git repository, to commit seeded history on."""

    def __init__(self, tmp_path: Path):
        self.path = tmp_path / "repo"
        files = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.split("\0")
        for f in filter(None, files):
            if (REPO / f).is_file():
                (self.path / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / f, self.path / f)
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-qm", "base")

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def commit(self, subject: str, path: str, old: str | None = None, new: str = "") -> str:
        """Replace `old` by `new` in `path` (append `new` when old is None), commit; the sha."""
        file = self.path / path
        text = file.read_text()
        if old is None:
            changed = text + new
        else:
            assert old in text, f"{old!r} not in {path}"
            changed = text.replace(old, new)
        file.write_text(changed)
        self.git("commit", "-qam", subject)
        return self.git("rev-parse", "HEAD")
