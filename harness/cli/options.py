"""Command-line options shared by the verbs that start servers and write a report
(`ab`, `sweep`, `bisect`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click


def report_options(command: Callable) -> Callable:
    """--out-dir, --ready-timeout and --quiet, as every such verb takes them."""
    for option in reversed(
        (
            click.option(
                "--out-dir",
                type=click.Path(file_okay=False, path_type=Path),
                default=Path("results"),
                show_default=True,
                help="Where the report goes.",
            ),
            click.option(
                "--ready-timeout",
                type=float,
                default=180.0,
                show_default=True,
                help="Seconds to wait for each cold server to answer /health.",
            ),
            click.option("--quiet", is_flag=True, help="No live progress display."),
        )
    ):
        command = option(command)
    return command
