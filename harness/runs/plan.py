"""What each arm of a verb is, from its command-line options: a git ref of the project (checked
out, built, served as servegate.toml says), a command template, or a running server's URL; with
the flags, environment and model it gets. Flags are never dropped on the way: a flag no arm's
command can take is an error naming the option it came from."""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from harness.arms.arms import Arm, ArmError, command_arm, program, project_arm, url_arm
from harness.arms.builds import build
from harness.arms.project import Project, ProjectError, check_devices, device_list
from harness.arms.worktrees import Checkout, checkout, commit_facts, planned
from harness.results import ab_result
from harness.results.run import Run
from harness.workload.suite import Suite

WORKING_TREE = "WORKTREE"


@dataclass(frozen=True)
class ArmPlan:
    name: str  # base | head | null | arm
    arm: Arm
    desc: ab_result.Arm  # label, ref, commit, flags, env, cmd: what the report shows
    checkout: Checkout | None = None


@dataclass(frozen=True)
class Side:
    """What the command line said about one arm; `prefix` names its options (--base-cmd ...)."""

    ref: str | None = None
    flags: str = ""
    env: str = ""
    cmd: str | None = None
    url: str | None = None
    pid: int | None = None
    prefix: str = ""  # "base" -> --base, --base-cmd, --base-flags; "" -> --ref, --serve-cmd

    def option(self, what: str) -> str:
        if self.prefix:
            return f"--{self.prefix}" + (f"-{what}" if what != "ref" else "")
        return {"cmd": "--serve-cmd", "flags": "--flags"}.get(what, f"--{what}")

    @property
    def launched_from_git(self) -> bool:
        return not (self.cmd or self.url)


@dataclass(frozen=True)
class Context:
    """What every arm of one verb shares."""

    suite: Suite
    repo: Path | None = None  # the repository of git-ref arms
    project: Project | None = None  # its servegate.toml
    model: str | None = None  # --model
    flags: str | None = None  # --flags: replaces the suite's
    isolated: bool = False
    api_key: str | None = ""
    build: bool = True  # False for --dry-run: plan every arm; check out, build, create nothing


def parse_env(text: str, option: str = "--env") -> tuple[tuple[str, str], ...]:
    pairs = []
    try:
        items = shlex.split(text or "")
    except ValueError as exc:
        raise ArmError(f"{option} {text!r}: {exc}") from None
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ArmError(f"{option}: environment settings are KEY=VALUE, got {item!r}")
        pairs.append((key, value))
    return tuple(pairs)


def check_sides(sides: dict[str, Side]) -> bool:
    """Whether any arm is served from a git ref (and so needs the repository and its project
    file); one arm named two ways is an error."""
    for side in sides.values():
        given = [side.option(w) for w in ("ref", "cmd", "url") if getattr(side, w)]
        if len(given) > 1:
            raise ArmError(f"give {' or '.join(given[:2])}, not both")
        if side.pid is not None and not side.url:
            raise ArmError(f"{side.option('pid')} only applies with {side.option('url')}")
    return any(side.launched_from_git for side in sides.values())


def default_refs(sides: dict[str, Side]) -> dict[str, Side]:
    """As `git diff` compares: the base defaults to HEAD, the head to the working tree."""
    defaults = {"base": "HEAD", "head": WORKING_TREE, "null": "HEAD"}
    return {
        n: replace(s, ref=s.ref or defaults.get(n, WORKING_TREE)) if s.launched_from_git else s
        for n, s in sides.items()
    }


def flags_for(side: Side, ctx: Context, server: str) -> tuple[str, list[str]]:
    """The arm's flags and where each part came from (named as the user would find it)."""
    parts = []
    if ctx.flags is not None:
        parts.append(("--flags", ctx.flags))
    elif own := ctx.suite.flags_for(server):
        parts.append((f"suite {ctx.suite.name}'s flags for {server or 'any server'}", own))
    if side.flags and side.option("flags") != "--flags":
        parts.append((side.option("flags"), side.flags))
    parts = [(src, text) for src, text in parts if text.strip()]
    return " ".join(t for _, t in parts), [f"{src} ({text!r})" for src, text in parts]


def _flags_reach(arm: Arm, name: str, sources: list[str]) -> Arm:
    if sources and not arm.takes_flags:
        where = "it is a running server" if not arm.launches else "its command has no {flags}"
        raise ArmError(f"{sources[0]} cannot reach the {name} arm: {where}")
    return arm


def plan_arm(name: str, side: Side, ctx: Context) -> ArmPlan:
    env = parse_env(side.env, side.option("env"))
    model = ctx.model or (ctx.project.model if ctx.project and side.launched_from_git else "")
    model = model or ctx.suite.model
    gauges = {"gauges": ctx.project.gauges, "gauge_scale": ctx.project.gauge_scale} if (
        ctx.project and not side.launched_from_git) else {}  # fmt: skip
    if side.url:
        arm = url_arm(model, side.url, side.pid, side.option("url"), api_key=ctx.api_key,
                      **gauges)  # fmt: skip
        _flags_reach(arm, name, flags_for(side, ctx, "")[1])
        desc = ab_result.Arm(label=side.url, ref=None, cmd=None, flags=[], env={})
        return ArmPlan(name, arm, desc)
    if side.cmd:
        server = program(side.cmd)
        flags, sources = flags_for(side, ctx, server)
        arm = command_arm(model, flags, side.cmd, side.option("cmd"), env=env, api_key=ctx.api_key,
                          **gauges)  # fmt: skip
        arm = _flags_reach(arm, name, sources)
        desc = ab_result.Arm(label=server, ref=None, cmd=side.cmd, flags=flags.split(),
                             env=dict(env))  # fmt: skip
        return ArmPlan(name, arm, desc)
    assert ctx.repo is not None and ctx.project is not None, "a git-ref arm needs its project"
    project = ctx.project.variant(ctx.isolated)
    co = (checkout if ctx.build else planned)(ctx.repo, side.ref or WORKING_TREE)
    flags, sources = flags_for(side, ctx, project.name)
    arm = project_arm(project, co, model, flags, env, api_key=ctx.api_key)
    arm = _flags_reach(arm, name, sources)
    if ctx.build:
        build(project, co)
    desc = ab_result.Arm(
        label=co.label,
        ref=co.ref,
        commit=co.commit,
        **commit_facts(ctx.repo, co.commit),
        dirty=co.dirty,
        cmd=" ".join(arm.command(0)).replace("--port 0", "--port {port}"),
        flags=flags.split(),
        env=dict(env),
    )
    return ArmPlan(name, arm, desc, co)


def _tokens(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()


def differing_tokens(a: str, b: str) -> tuple[list[str], list[str]]:
    """The tokens of command a and of command b that the other does not have there; a changed
    value keeps its option's name (`--ttft-ms 40` vs `--ttft-ms 52`, not `40` vs `52`)."""
    ta, tb = _tokens(a), _tokens(b)
    only_a, only_b = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ta, b=tb, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        named = i1 > 0 and ta[i1 - 1].startswith("-") and op == "replace"
        only_a += ta[i1 - 1 : i2] if named else ta[i1:i2]
        only_b += tb[j1 - 1 : j2] if named else tb[j1:j2]
    return only_a, only_b


def label_arms(plans: dict[str, ArmPlan], sides: dict[str, Side]) -> None:
    """Name each arm by what differs between the two, so every title says what was compared:
    the label says what is served (ref@commit, a program, a URL); when the arms' own flags or
    env differ, each label adds its own (`default` for the arm without: `HEAD@1a2b default vs
    WORKTREE@1a2b --prefill-max-seqs 4`). Same label on both sides: each adds its command's
    differing tokens too, and arms that differ in nothing add `default`."""
    base, head = sides["base"], sides["head"]
    same = plans["base"].desc.label == plans["head"].desc.label
    if not same and (base.flags, base.env) == (head.flags, head.env):
        return  # the labels say it: two commits, or two servers, with the same flags
    both = same and base.cmd and head.cmd
    cmd_diff = differing_tokens(base.cmd or "", head.cmd or "") if both else ([], [])
    for name, own in zip(("base", "head"), cmd_diff, strict=True):
        s = sides[name]
        extra = " ".join(x for x in (" ".join(own), s.flags, s.env) if x) or "default"
        desc = plans[name].desc
        plans[name] = replace(
            plans[name], desc=replace(desc, label=f"{desc.label} {extra}".strip())
        )


def unsampled_memory(suite: Suite, plans: dict[str, ArmPlan]) -> tuple[Suite, list[str]]:
    """A running server given without its pid has no RSS to sample: the suite without the host
    memory gate, and the note saying why."""
    blind = [p for p in plans.values() if not p.arm.launches and p.arm.pid is None]
    if not blind or "peak_rss_bytes" not in suite.gate:
        return suite, []
    gate = {k: v for k, v in suite.gate.items() if k != "peak_rss_bytes"}
    names = ", ".join(f"{p.name} ({p.arm.url})" for p in blind)
    note = f"host memory is not gated: no pid for {names}, so its RSS cannot be sampled"
    return replace(suite, gate=gate), [note]


def commit_problem(plan: ArmPlan, run: Run) -> str | None:
    """A server that says which commit it serves must serve the one it was built from."""
    if plan.checkout is None or not plan.arm.reports_commit:
        return None
    reported = run.server.commit if run.server else None
    if reported != plan.checkout.commit:
        return f"{plan.name} served commit {reported}, expected {plan.checkout.commit}"
    return None


def together(
    plans: dict[str, ArmPlan], asked: str | None = None, devices: tuple[str, ...] = ()
) -> bool:
    """Whether a round's servers start at once: as `--residency` asks, else only when every
    arm that launches a server comes from a project file that says `residency = "together"`
    (a command arm may hold a whole GPU; an arm at a URL starts nothing) and they were not
    all placed on one device."""
    if asked:
        return asked == "together"
    if len(devices) == 1:
        return False
    launching = [p.arm for p in plans.values() if p.arm.launches]
    return len(launching) > 1 and all(a.residency == "together" for a in launching)


def placed_devices(
    asked: str | None, project: Project | None, plans: dict[str, ArmPlan], at_once: bool = True
) -> tuple:
    """The devices arms run on: `--devices 0,1` as asked, else the project file's `devices`
    (only when an arm is served from it), else none (servers start wherever they do). Two or
    more run a round's arms at once, one each, so there must be one for every launching arm
    (unless `at_once` is false: a sweep's servers run one at a time, rotated over them)."""
    try:
        if asked is not None:
            devices = check_devices([d.strip() for d in asked.split(",")], "--devices")
        else:
            from_project = any(p.checkout is not None for p in plans.values())
            devices = project.devices if project and from_project else ()
    except ProjectError as exc:
        raise ArmError(str(exc)) from None
    launching = [n for n, p in plans.items() if p.arm.launches]
    if at_once and len(devices) > 1 and len(devices) < len(launching):
        raise ArmError(
            f"devices {device_list(devices)}: {len(launching)} arms ({', '.join(launching)}) run "
            f"at once on devices of their own, so give at least {len(launching)} (or one, "
            "for one at a time)"
        )
    return devices
