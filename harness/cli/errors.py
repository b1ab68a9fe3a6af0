"""How a verb says that its input was bad: one line on stderr, exit 2, whatever it quotes
(a server's error, a path, a name) shown without escape sequences or control characters."""

from __future__ import annotations

import click
from rich.markup import escape as markup_escape

from harness.escape import terminal

EXIT_INVALID = 2


def shown(text: object) -> str:
    """Text from elsewhere (a name, a server's message) as a rich table shows it: one line with
    no control character, its `[...]` printed rather than read as markup."""
    return markup_escape(terminal(text))


def one_line(message: object) -> str:
    """Any message as one line (stderr's contract: one line per failure), with no escape
    sequence or control character of whatever it quotes (a server's error, a path)."""
    return " ".join(terminal(message).split()) or "no message"


class InputError(click.ClickException):
    """Bad input: printed as one `Error: ...` line, exit code 2."""

    exit_code = EXIT_INVALID

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def input_error(exc: Exception) -> InputError:
    """The one-line error for bad input; a failed build shows its log's tail above it."""
    if tail := getattr(exc, "log_tail", ""):
        lines = terminal(tail, multiline=True).splitlines()[-10:]
        click.echo("\n".join(f"build log: {line}" for line in lines), err=True)
    return InputError(str(exc))
