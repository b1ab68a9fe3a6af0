"""A throwaway project whose every name is an attack: the commit subjects, the branch an A/B
heads, the suite's description, the model name its server reports, the error its server
answers some requests with and the banner its log starts with carry raw HTML and SVG, a
`javascript:` URL, Markdown images and links, @mentions, `|`, newlines, terminal escape
sequences and rich markup. Its history is recorded by `harness run --ref` (one commit's server
fails every request: an invalid run), one short `harness ab` heads the hostile branch, and a
copy of a run claims a hostile suite name under a hostile file name, as a result file anyone
can commit to a history folder could. Every output the harness writes from these inputs must
show them as text (tests/harness/report/test_escaping.py).

`beacon` is a loopback URL (a recording HTTP server the test starts): every image or link the
payloads carry points at it, so a page that fetched anything leaves a trace."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from helpers import project_repo
from helpers.cli import client_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.project_repo import ProjectRepo

SENTINEL = "data-pwned"  # the attribute a payload that ran would set on <body>
SET = f"document.body.setAttribute('{SENTINEL}','yes')"
RICH = "[bold red]x[/bold red]"
ESCAPES = ("\x1b[31m", "\x1b]0;title\x07", "\x1b[2J")

BUILD = """\
import pathlib, sys
ttft = pathlib.Path("src/ttft_ms").read_text().strip()
pathlib.Path("build").mkdir(exist_ok=True)
extra = pathlib.Path("src/extra_args").read_text()
pathlib.Path("build/server.args").write_text(f"--ttft-ms\\n{ttft}\\n--itl-ms\\n2\\n{extra}")
with open(sys.argv[2], "a") as builds:
    builds.write(f"{sys.argv[1]} {pathlib.Path.cwd()}\\n")
"""


def payload(beacon: str, tag: str) -> str:
    """One line of every kind of attack, `tag` telling the channels apart."""
    return (
        f'{tag} <img src={beacon}/{tag}-img onerror="{SET}"> <script>{SET}</script> '
        f'<svg onload="{SET}"></svg> [link](javascript:{SET}) ![pic]({beacon}/{tag}-md.png) '
        f"<{beacon}/{tag}-auto> @mallory #1 a|b {RICH} {ESCAPES[0]}red{ESCAPES[1]}{ESCAPES[2]}"
    )


def branch_name(beacon: str) -> str:
    """What git allows in a branch name: no space, `:`, `//`, `[` or control character."""
    return f"evil<img/src=x/onerror={SET.replace(' ', '')}>|@mallory"


def evil_file_name(beacon: str) -> str:
    """No `/` in a file name: the image is relative (a file URL, no fetch)."""
    return f'x"><svg onload="{SET}"><img src="file-img" onerror="{SET}">.json'


SUITE = project_repo.SUITE.replace("\n[warmup]", "\ndescription = {description}\n[warmup]", 1)


@dataclass
class Hostile:
    repo: ProjectRepo
    tmp: Path
    beacon: str
    branch: str
    history: Path  # runs of commits, the A/B's result, the forged copy
    ab_dir: Path
    summary: Path  # the A/B's --summary file
    invalid_summary: Path  # the invalid A/B's
    subjects: list[str] = field(default_factory=list)
    shas: list[str] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)  # command -> its stdout + stderr
    site: Path | None = None

    def harness(self, name: str, *args: str, ok: tuple[int, ...] = (0,)):
        r = self.repo.harness(*args, cache=self.tmp / "cache")
        self.outputs[name] = self.outputs.get(name, "") + r.stdout + r.stderr
        assert r.returncode in ok, (args, r.stdout, r.stderr)
        return r


def extra_args(beacon: str, fail: int = 0) -> str:
    lines = ["--served-model", payload(beacon, "model"), "--banner", payload(beacon, "log")]
    if fail:
        lines += ["--fail-every", str(fail), "--error-message", payload(beacon, "error")]
    return "".join(f"{line}\n" for line in lines)


def build_hostile(tmp: Path, beacon: str) -> Hostile:
    marker = unique_marker()
    repo = ProjectRepo(tmp, marker)
    (repo.path / "build.py").write_text(BUILD)
    description = json.dumps(payload(beacon, "description") + "\nsecond line | x")
    (repo.path / "suite.toml").write_text(SUITE.format(model=marker, description=description))
    (repo.path / "src" / "extra_args").write_text(extra_args(beacon))
    repo.git("add", "-A")
    h = Hostile(repo, tmp, beacon, branch_name(beacon), tmp / "history", tmp / "history" / "ab",
                tmp / "summary.md", tmp / "invalid-summary.md")  # fmt: skip
    # three commits on main, each subject an attack; the last one's server fails every request
    for i in range(3):
        subject = payload(beacon, f"subject{i}")
        if i == 2:
            (repo.path / "src" / "extra_args").write_text(extra_args(beacon, fail=1))
        repo.git("add", "-A")
        repo.git("commit", "-q", "--allow-empty", "--cleanup=verbatim", "-m", subject)
        h.subjects.append(subject)
        h.shas.append(repo.git("rev-parse", "HEAD"))
    for i, sha in enumerate(h.shas):
        out = h.history / f"{sha[:10]}.json"
        run = ("run", "--ref", sha, "--suite", "suite.toml", "--out", str(out))
        r = h.harness("run", *run, ok=(2,) if i == 2 else (0, 2))
        if i < 2 and r.returncode == 2:  # valid, unless a loaded machine starved the client
            assert client_starved(json.loads(out.read_text())), (r.stdout, r.stderr)
            h.harness("run", *run)  # once more
    # the branch an A/B heads: its server answers one request in four with the hostile error
    repo.git("checkout", "-q", "-b", h.branch, h.shas[1])
    (repo.path / "src" / "extra_args").write_text(extra_args(beacon, fail=4))
    repo.git("commit", "-q", "--cleanup=verbatim", "-am", payload(beacon, "branch-subject"))
    repo.git("checkout", "-q", "main")
    ab = ("ab", "--base", h.shas[1], "--head", h.branch, "--suite", "suite.toml",
          "--rounds", "3", "--max-rounds", "3", "--out-dir", str(h.ab_dir),
          "--summary", str(h.summary))  # fmt: skip
    h.harness("ab", *ab, ok=(0, 1, 2))
    if client_starved(json.loads(next(h.ab_dir.glob("*.json")).read_text())):
        shutil.rmtree(h.ab_dir)  # INVALID for the machine, not the inputs: once more, in place
        h.summary.unlink(missing_ok=True)
        h.harness("ab", *ab, ok=(0, 1, 2))
    # an A/B whose head's server fails every request: INVALID, its reasons quote the error
    h.harness("ab", "ab", "--base", h.shas[1], "--head", h.shas[2], "--suite", "suite.toml",
              "--rounds", "3", "--max-rounds", "3", "--out-dir", str(h.ab_dir),
              "--summary", str(h.invalid_summary), ok=(2,))  # fmt: skip
    # a result file anyone could commit: a run claiming a hostile suite, under a hostile name
    run = json.loads((h.history / f"{h.shas[0][:10]}.json").read_text())
    for r in run["runs"]:
        r["suite"]["name"] = payload(beacon, "suite") + "\nnewline | row"
    (h.history / evil_file_name(beacon)).write_text(json.dumps(run))
    h.harness("history", "history", str(h.history))
    h.site = tmp / "site"
    h.harness("publish", "publish", str(h.history), "--out", str(h.site))
    assert not wait_no_survivors(marker)
    shutil.rmtree(tmp / "cache", ignore_errors=True)  # the worktrees: not needed any more
    return h
