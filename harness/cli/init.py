"""`harness init`: recognise the server a repository builds (vLLM, SGLang, TGI, llama.cpp, a
Cargo binary, a Python package) from its files and write the servegate.toml and the pull-request
workflow that gate it, every guess said as one."""

from __future__ import annotations

from pathlib import Path

import click

from harness.adopt.project_file import project_text
from harness.adopt.repository import asgi_app, mentions_api, snapshot
from harness.adopt.shapes import LOOKED_FOR, recognise
from harness.adopt.workflow import ACTION, ACTION_REF, workflow_text
from harness.adopt.workflow import PATH as WORKFLOW_PATH
from harness.arms.project import FILE_NAME
from harness.cli.errors import InputError
from harness.escape import terminal
from harness.files import write_atomic


@click.command()
@click.option(
    "--dir",
    "root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The repository's root.",
)
@click.option("--force", is_flag=True, help="Replace servegate.toml and the workflow if present.")
@click.option(
    "--action",
    default=ACTION,
    show_default=True,
    metavar="OWNER/REPO@REF",
    help="The action the workflow uses: a fork, a pinned tag or commit, or ./path in this repo.",
)
def init(root: Path, force: bool, action: str) -> None:
    """Write servegate.toml and .github/workflows/servegate.yml for the server in this repository.

    Reads files only (pyproject.toml, setup.py, requirements.txt, CMakeLists.txt, Cargo.toml,
    source markers) and recognises vLLM, SGLang, text-generation-inference, llama.cpp, a Cargo
    binary, a Python package or a FastAPI app serving the OpenAI API. It prints what it
    recognised and every guess it made (`assumed: ...`, also written as a `check:` comment
    above the key it shaped); correct them, then run `harness check`. Exit 2 without writing
    anything when a file is already there (unless --force) or when nothing is recognised.

    \b
    harness init
    harness init --dir ../my-server --force
    """
    if not ACTION_REF.fullmatch(action):
        raise InputError(f"--action {action!r} is not OWNER/REPO@REF nor ./PATH")
    project, workflow = root / FILE_NAME, root / WORKFLOW_PATH
    for folder in (workflow.parent.parent, workflow.parent):  # .github, .github/workflows
        if folder.is_symlink():
            raise InputError(f"{folder} is a symbolic link: nothing written through it")
    there = next((p for p in (project, workflow) if p.exists() or p.is_symlink()), None)
    if not force and there:
        raise InputError(f"{there} exists: nothing written (--force replaces it)")
    shape = recognise(
        snapshot(root), lambda folder: mentions_api(root, folder), lambda: asgi_app(root)
    )
    if shape is None:
        raise InputError(
            f"no server recognised in {root.resolve()}: looked for {LOOKED_FOR}; write "
            f"{FILE_NAME} by hand (docs/projects.md)"
        )
    click.echo(terminal(f"recognised: {shape.kind}: {shape.evidence}"))
    for guess in shape.guesses:
        click.echo(terminal(f"assumed: {guess.text}"))
    try:
        workflow.parent.mkdir(parents=True, exist_ok=True)
        texts = {project: project_text(shape), workflow: workflow_text(shape, action)}
        for path, text in texts.items():
            write_atomic(path, text)  # a link in its place is replaced, never written through
    except OSError as exc:
        raise InputError(f"not written: {exc.filename}: {exc.strerror or exc}") from None
    click.echo(f"wrote {project}")
    click.echo(f"wrote {workflow}")
    click.echo("next: harness check (builds HEAD, sends one request, says what a gate costs)")
