"""`harness gc`: free the disk that cached commit worktrees and builds take."""

from __future__ import annotations

import time
from pathlib import Path

import click

from harness.arms.cache import entries, remove, stale
from harness.arms.worktrees import RefError, cache_dir, repo_root
from harness.cli.ab import InputError


@click.command()
@click.option(
    "--older-than",
    "days",
    type=click.FloatRange(0),
    default=14.0,
    show_default=True,
    metavar="DAYS",
    help="Remove the commits not used for this many days (0: every one).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def gc(days, dry_run):
    """Remove cached commit worktrees and their builds that have not been used for a while.

    ab, sweep, bisect and run --ref check out each commit once into a cache
    ($SERVEGATE_CACHE, else ~/.cache/servegate) and build it there; nothing removes them but
    this. A removed commit is checked out and built again the next time it is asked for.
    """
    try:
        repo = repo_root(Path.cwd())
    except RefError:
        raise InputError(
            f"{Path.cwd()} is not inside a git repository: gc cleans the cached worktrees of "
            "the repository it runs in"
        ) from None
    now = time.time()
    cached = entries(repo)
    doomed = stale(cached, days, now)
    for e in doomed:
        verb = "would remove" if dry_run else "removed"
        if not dry_run:
            remove(repo, e)
        click.echo(
            f"{verb} {e.sha[:10]}: {e.bytes / 2**20:.1f} MiB, unused {e.idle_days(now):.1f} days"
        )
    freed = sum(e.bytes for e in doomed) / 2**20
    kept = len(cached) - len(doomed)
    click.echo(f"{'would free' if dry_run else 'freed'} {freed:.1f} MiB; {kept} commit(s) kept in "
               f"{cache_dir(repo)}")  # fmt: skip
