"""The servegate.toml `harness init` writes for a recognised server: every key it knows, each
guess as a `check:` comment above the key it shaped, and a KV-pool gauge left commented out
where its scale can only come from the server's first start."""

from __future__ import annotations

import json
import textwrap

from harness.adopt.shapes import Shape

HEADER = (
    "How servegate builds one commit of this repository and starts the server it builds; "
    "written by `harness init`, which recognised {kind}: {evidence}. Each `check:` line is a "
    "guess: correct it, then run `harness check` (it builds HEAD, sends one request and says "
    "what a gate costs). Every key is in servegate's docs/projects.md."
)


def toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def comment(text: str, first: str = "# check: ", rest: str = "#   ") -> list[str]:
    return textwrap.wrap(text, 98, initial_indent=first, subsequent_indent=rest)


def project_text(shape: Shape) -> str:
    header = HEADER.format(kind=shape.kind, evidence=shape.evidence)
    lines = [*comment(header, "# ", "# "), "", "[server]"]

    def key(name: str, value: str, note: str = "") -> None:
        for guess in shape.guesses:
            if guess.key == name:
                lines.extend(comment(guess.text))
        lines.append(f"{name} = {value}" + (f"  # {note}" if note else ""))

    key("name", toml_string(shape.name), "what a suite's flags are keyed by")
    if shape.build:
        key("build", toml_string(shape.build))
    if shape.build_timeout:
        key("build_timeout", str(shape.build_timeout), "seconds a build may take")
    key("serve", toml_string(shape.serve))
    if shape.model:
        key("model", toml_string(shape.model))
    if shape.env:
        pairs = ", ".join(f"{k} = {toml_string(v)}" for k, v in shape.env)
        key("env", f"{{ {pairs} }}", "added to the server's environment")
    if shape.ready_path:
        key("ready_path", toml_string(shape.ready_path), "polled until it answers 200")
    else:
        lines.extend(g for guess in shape.guesses if guess.key == "ready_path"
                     for g in comment(guess.text))  # fmt: skip
    if shape.ready_timeout:
        key("ready_timeout", str(shape.ready_timeout), "seconds: weights, compilation, graphs")
    residency = (
        "a GPU server holds its device: one server up at a time"
        if shape.gpu
        else 'or "together": a round\'s servers start at once'
    )
    key("residency", toml_string("one-at-a-time"), residency)
    if shape.gauge:
        lines += ["", *comment(next(g.text for g in shape.guesses if g.key == "device_memory"))]
        lines += comment(
            f"to gate it, uncomment and set scale to {shape.gauge_scale} (docs/projects.md, "
            '"Servers on GPUs")',
            "# ",
            "# ",
        )
        lines += ["# [server.device_memory]", f"# gauges = [{toml_string(shape.gauge)}]",
                  "# scale = 0"]  # fmt: skip
    lines += ["", "[gate]", *comment(
        "the suite `harness check`, `harness ab` and `harness bisect` run here without --suite; "
        "the workflow names it too (its `suites` input)", "# ", "# "),
        f"suite = {toml_string(shape.suite)}"]  # fmt: skip
    return "\n".join(lines) + "\n"
