"""The `servegate` fixture's object: `harness ab` and `harness run` as a subprocess of this
interpreter's harness (`python -m harness`), writing into the test's own folder; the saved
result read back through harness.results.store as a typed record, and kept again in
pytest-benchmark's shape. A run that is INVALID (exit 2) raises ServegateInvalid, whose message
is the harness's one-line reason."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from harness.files import strict_json
from harness.plugin.outcome import GateResult, RunResult, gate_result, run_result
from harness.report.benchmark_export import machine_id, saved_run
from harness.results import store

STOP_GRACE_S = 30  # a harness asked to stop (SIGTERM) stops its servers within this


class ServegateError(Exception):
    """The harness gave no result: bad input, an interrupt or an internal error (its line)."""


class ServegateInvalid(ServegateError):
    """Exit 2: a run was invalid, an arm crashed or the input was bad, so nothing was judged.
    `result` is the saved result when one was written, else None."""

    def __init__(self, message: str, result: GateResult | RunResult | None = None):
        super().__init__(message)
        self.result = result


class ServegateUsageError(ServegateError, TypeError):
    """An option the fixture sets itself (where the result goes) given by the test."""


def cli_options(options: Mapping[str, object]) -> list[str]:
    """Keyword options as the CLI's: base_cmd="x" -> --base-cmd=x, quiet=True -> --quiet, a
    list or tuple repeats the option, None and False leave it out."""
    args = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
            continue
        for v in value if isinstance(value, list | tuple) else [value]:
            args.append(f"{flag}={v}")
    return args


class Servegate:
    """Runs the harness for one test: each call writes into its own folder under `tmp_path`,
    starts from `cwd` (relative paths in commands and suites resolve there) and, with a
    `storage`, also writes the result in pytest-benchmark's shape there. `defaults` are options
    for every run, placed before each call's own (the last of an option wins)."""

    def __init__(
        self,
        *,
        tmp_path: Path,
        test: str,
        nodeid: str,
        cwd: Path,
        storage: Path | None,
        defaults: tuple[str, ...] = (),
    ):
        self.tmp_path = Path(tmp_path)
        self.test = test
        self.nodeid = nodeid
        self.cwd = Path(cwd)
        self.storage = storage
        self.defaults = list(defaults)  # options for every run, before the call's own
        self.calls = 0

    def ab(
        self,
        *args: str,
        check: bool = True,
        timeout: float | None = None,
        env: Mapping[str, str | None] | None = None,
        **options: object,
    ) -> GateResult:
        """`harness ab` with these options (`harness ab --help`: base, head, base_cmd,
        head_cmd, base_url, head_url, suite, model, rounds, max_rounds, requests, clients,
        flags, base_flags, head_flags, ...) and extra `args`, as the test's gate. INVALID
        raises ServegateInvalid unless `check` is False; `env` is laid over this environment
        (None removes a variable); `timeout` stops it (SIGTERM: it stops its servers)."""
        out = self._folder("ab", options, "out_dir")
        proc = self._harness(["ab", "--quiet", f"--out-dir={out}"], options, args, timeout, env)
        saved = sorted(out.glob("*.json"))
        if not saved:
            raise _no_result("ab", proc)
        doc = _load(saved[0])
        result = gate_result(doc, saved[0], saved[0].with_suffix(".md"))
        if result.exit_code == 2:
            if check:
                reasons = result.invalid or ("nothing was judged",)
                more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
                raise ServegateInvalid(
                    f"harness ab INVALID: {reasons[0]}{more}; report: {result.report}", result
                )
            return result
        return replace(result, benchmark_json=self._keep(doc, str(result.report)))

    def run(
        self,
        *args: str,
        check: bool = True,
        timeout: float | None = None,
        env: Mapping[str, str | None] | None = None,
        **options: object,
    ) -> RunResult:
        """`harness run` with these options (`harness run --help`: suite, ref, serve_cmd, url,
        model, flags, repeat, requests, clients, ...) and extra `args`: one arm, `repeat` cold
        runs. An invalid run raises ServegateInvalid unless `check` is False."""
        out = self._folder("run", options, "out") / "run.json"
        proc = self._harness(["run", "--quiet", f"--out={out}"], options, args, timeout, env)
        if not out.is_file() or out.stat().st_size == 0:
            raise _no_result("run", proc)
        doc = _load(out)
        result = run_result(doc, out, proc.returncode)
        if result.verdict == "INVALID":
            if check:
                reasons = result.invalid or (_line(proc),)
                more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
                raise ServegateInvalid(f"harness run INVALID: {reasons[0]}{more}", result)
            return result
        return replace(result, benchmark_json=self._keep(doc, str(out)))

    def _folder(self, verb: str, options: Mapping, owned: str) -> Path:
        if owned in options:
            raise ServegateUsageError(
                f"servegate.{verb}() writes into the test's tmp_path: no {owned}="
            )
        self.calls += 1
        folder = self.tmp_path / f"servegate-{verb}-{self.calls}"
        folder.mkdir(parents=True)
        return folder

    def _harness(self, head: list[str], options, args, timeout, env) -> subprocess.CompletedProcess:
        own = [*cli_options(options), *map(str, args)]
        cmd = [sys.executable, "-m", "harness", *head, *self.defaults, *own]
        merged = dict(os.environ)
        for name, value in (env or {}).items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        proc = subprocess.Popen(
            cmd, cwd=self.cwd, env=merged, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except BaseException:  # a timeout or the test interrupted: the harness stops its servers
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)

    def _keep(self, doc: Mapping, report: str) -> Path | None:
        """The result in pytest-benchmark's shape, as the storage's next numbered file."""
        if self.storage is None:
            return None
        saved = saved_run(doc, self.test, self.nodeid, commit_info(self.cwd), report)
        return save_numbered(self.storage / machine_id(), _slug(self.test), strict_json(saved))


def save_numbered(folder: Path, name: str, text: str) -> Path:
    """folder/NNNN_servegate-NAME.json, NNNN one past the highest number there (as
    pytest-benchmark numbers its saved runs), created exclusively."""
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        taken = [int(p.name[:4]) for p in folder.glob("[0-9][0-9][0-9][0-9]_*.json")]
        path = folder / f"{max(taken, default=0) + 1:04d}_servegate-{name}.json"
        try:
            with path.open("x", encoding="utf-8") as f:
                f.write(text + "\n")
        except FileExistsError:
            continue  # another process took the number
        return path


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:100]


def commit_info(cwd: Path) -> dict:
    """pytest-benchmark's commit_info of the repository the tests run in (its `git` answers)."""

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
        except OSError:
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if sha is None:
        return {"id": "unversioned", "time": None, "author_time": None, "dirty": False,
                "project": cwd.name, "branch": "(unknown)"}  # fmt: skip
    times = (git("show", "-s", "--format=%cI%n%aI") or "\n").split("\n")
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    return {
        "id": sha,
        "time": times[0] or None,
        "author_time": times[-1] or None,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "project": Path(git("rev-parse", "--show-toplevel") or cwd).name,
        "branch": "(detached head)" if branch == "HEAD" else branch or "(unknown)",
    }


def _line(proc: subprocess.CompletedProcess) -> str:
    """The harness's one line: its `Error:` (bad input) or `error:` line (a server that never
    became ready), else the last line it wrote."""
    for line in proc.stderr.splitlines():
        if line.lower().startswith("error: "):
            return line[len("error: ") :]
    lines = [ln for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "no output"


def _load(path: Path) -> Mapping:
    """The saved result, or ServegateError naming why it cannot be read."""
    try:
        return store.load(path)
    except (ValueError, OSError) as exc:  # ComparisonError is a ValueError
        raise ServegateError(f"{path}: {exc}") from None


def _no_result(verb: str, proc: subprocess.CompletedProcess) -> ServegateError:
    message = f"harness {verb} exit {proc.returncode}, no result: {_line(proc)}"
    return ServegateInvalid(message) if proc.returncode == 2 else ServegateError(message)
