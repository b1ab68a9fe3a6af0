"""What the command line says of the arms, beyond the options themselves: the two sides,
the suite this repository gates with, and the context every arm of one verb shares."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Self

from harness.arms.arms import ArmError
from harness.arms.project import ProjectError, find_project, load_project
from harness.arms.worktrees import RefError, repo_root
from harness.runs.plan import Context, Side, check_sides
from harness.workload.suite import DEFAULT_SUITE, Suite


def suite_here(asked: str | None, project_file: Path | None) -> str:
    """--suite as given, else the suite this repository's project file gates with, else the
    default (a broken project file is said where the arms are planned, not here)."""
    if asked is not None:
        return asked
    try:
        project = find_project(repo_root(Path.cwd()), project_file)
    except (RefError, ProjectError):
        return DEFAULT_SUITE
    return project.suite or DEFAULT_SUITE


def sides_from(opts: dict, base_ref: str | None, head_ref: str | None) -> dict[str, Side]:
    """The two arms' Sides from side_options' values (popped from `opts`)."""
    return {
        arm: Side(
            ref,
            opts.pop(f"{arm}_flags"),
            opts.pop(f"{arm}_env"),
            opts.pop(f"{arm}_cmd"),
            opts.pop(f"{arm}_url"),
            opts.pop(f"{arm}_pid"),
            prefix=arm,
        )
        for arm, ref in (("base", base_ref), ("head", head_ref))
    }


def arm_context(
    sides: dict[str, Side],
    suite: Suite,
    model: str | None,
    flags: str | None,
    isolated: bool,
    api_key: str | None,
    build: bool = True,
    project_file: Path | None = None,
) -> Context:
    """The repository and project file when any arm is a git ref (raises RefError or
    ProjectError for a folder without them); `--isolated` only means something then. Without
    one, `--project FILE` still gives every arm what the file says of any server: its
    device-memory gauges, its device variable and its budget."""
    if not check_sides(sides):
        if isolated:
            raise ArmError("--isolated applies to arms served from git refs, and none is")
        project = load_project(project_file) if project_file else None
        return Context(suite, project=project, model=model, flags=flags, api_key=api_key)
    repo = repo_root(Path.cwd())
    project = find_project(repo, project_file)
    return Context(suite, repo, project, model, flags, isolated, api_key, build)


class WithSides:
    """A verb's options as a dataclass record whose `sides` field holds the per-arm options
    (side_options') that its other fields do not name."""

    @classmethod
    def of(cls, options: dict) -> Self:
        names = {f.name for f in fields(cls)} - {"sides"}  # type: ignore[arg-type]
        sides = {k: v for k, v in options.items() if k not in names}
        kept = {k: v for k, v in options.items() if k in names}
        return cls(**kept, sides=sides)  # type: ignore[call-arg]
