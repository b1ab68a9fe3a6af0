"""Text the harness did not write (commit subjects, branch and suite names, anything a server
returns) made inert where it is shown: Markdown that a pull request or a team's site renders,
and the terminal. HTML is escaped by the templates' autoescape, not here."""

from __future__ import annotations

import re

_MD_PUNCT = re.compile(r"([\\`*{}\[\]<>!|~&#]|(?<!\w)_|_(?!\w))")  # `_` inside a word is inert
# what would start a list item, or make a heading of the line above (`>` and `#` are escaped)
_MD_BLOCK_START = re.compile(r"^(\s*)([-+=])(?=\s|$|[-=\s]*$)|^(\s*\d+)([.)])(?=\s|$)")
ZWSP = "\u200b"  # invisible: breaks a mention, an issue reference or an autolink apart
# a mention starts a word (`main@1a2b`, a ref's label, is none); an e-mail autolink has a dot
_PINGS = re.compile(
    r"((?<!\w)@(?=\w)|@(?=[\w-]+\.\w)|#(?=\w))|(:)(?=//)|\b(www)(?=\.)", re.IGNORECASE
)

_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, screen clears
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks, clipboard writes
    r"|[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|[ -/]*[0-~]?)"  # any other escape
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def markdown(text: object) -> str:
    """`text` as literal Markdown on one line: no raw HTML, image, link, emphasis or code, no
    live @mention, issue reference or autolink, no `|` or newline to break a table row."""
    s = " ".join(_visible(str(text)).split())
    s = _MD_PUNCT.sub(r"\\\1", s)
    s = _MD_BLOCK_START.sub(lambda m: "\\".join(x for x in m.groups() if x is not None), s)
    return _PINGS.sub(lambda m: (m.group(1) or m.group(2) or m.group(3)) + ZWSP, s)


def _visible(text: str) -> str:
    """Escape sequences dropped, other control characters shown as `\\xNN` (newlines and tabs
    kept: the caller decides what a line is)."""
    s = _ANSI.sub("", text).replace("\r\n", "\n").replace("\t", "    ")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def code_span(text: object, *, table: bool = False) -> str:
    """`text` as one inline code span, shown exactly (on one line): delimited by a backtick run
    longer than any inside it, so it cannot close early; in a table cell a `|` is escaped (GFM
    splits cells before it parses code)."""
    s = " ".join(_visible(str(text)).split())
    if table:
        s = s.replace("|", "\\|")
    ticks = "`" * (1 + max((len(r) for r in re.findall(r"`+", s)), default=0))
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def fence(text: object, info: str = "") -> str:
    """`text` (many lines: a log tail) as a fenced code block it cannot close: the fence is a
    backtick run longer than any in it. No newline after the closing fence."""
    s = _visible(str(text)).rstrip("\n")
    ticks = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", s)), default=0))
    return f"{ticks}{info}\n{s}\n{ticks}"


def terminal(text: object, *, multiline: bool = False) -> str:
    """`text` safe to print: escape sequences dropped, other control characters (a carriage
    return that rewrites the line, a bell, bidirectional overrides) shown as `\\xNN`; newlines
    kept only where `multiline` (a log tail), else each line joined by ' / '."""
    lines = _visible(str(text)).split("\n")
    return "\n".join(lines) if multiline else " / ".join(x for x in lines if x.strip())
