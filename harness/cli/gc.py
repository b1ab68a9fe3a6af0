"""`harness gc`: free the disk that cached commit worktrees and builds take."""

from __future__ import annotations

import time
from pathlib import Path

import click

from harness.arms.cache import claimed, entries, linked_level, remove, stale
from harness.arms.worktrees import RefError, cache_dir, repo_root
from harness.cli.errors import InputError


@click.command()
@click.option(
    "--older-than",
    "days",
    type=click.FloatRange(0),
    default=14.0,
    show_default=True,
    metavar="DAYS",
    help="Remove the commits not used for this many days (0: every one not in use).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def gc(days, dry_run):
    """Remove cached commit worktrees and their builds that have not been used for a while.

    ab, sweep, bisect and run --ref check out each commit once into a cache
    ($SERVEGATE_CACHE, else ~/.cache/servegate) and build it there; nothing removes them but
    this. A removed commit is checked out and built again the next time it is asked for.

    Only what lies in this repository's folder of the cache is removed: a worktree a running
    harness is building or serving from is kept (and said so), a symbolic link there is
    removed as a link, never followed, and nothing outside the cache is touched.
    """
    try:
        repo = repo_root(Path.cwd())
    except RefError:
        raise InputError(
            f"{Path.cwd()} is not inside a git repository: gc cleans the cached worktrees of "
            "the repository it runs in"
        ) from None
    now = time.time()
    folder = cache_dir(repo)
    if (link := linked_level(folder)) is not None:
        raise InputError(f"{link} is a symbolic link: gc never removes through one; nothing "
                         "removed")  # fmt: skip
    cached = entries(repo)
    doomed = stale(cached, days, now)
    freed, busy = 0, 0
    for e in doomed:
        with claimed(e, folder) as free:
            if not free:
                busy += 1
                click.echo(f"kept {e.sha[:10]}: in use by a running harness (it holds "
                           f"{e.sha}.lock), unused {e.idle_days(now):.1f} days")  # fmt: skip
                continue
            notes = [] if dry_run else remove(repo, e)
        freed += e.bytes
        verb = "would remove" if dry_run else "removed"
        click.echo(
            f"{verb} {e.sha[:10]}: {e.bytes / 2**20:.1f} MiB, unused {e.idle_days(now):.1f} days"
        )
        for line in notes:
            click.echo(f"  {line}")
    kept = len(cached) - len(doomed) + busy
    why = f"{kept - busy} used within {days:g} days" + (f", {busy} in use" if busy else "")
    click.echo(f"{'would free' if dry_run else 'freed'} {freed / 2**20:.1f} MiB; {kept} "
               f"commit(s) kept in {folder} ({why})")  # fmt: skip
