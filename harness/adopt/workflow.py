"""The GitHub Actions workflow `harness init` writes beside servegate.toml: every pull request
gated by the servegate action, on a GPU runner for a GPU server. The template is this module's
text, so it ships inside the package."""

from __future__ import annotations

import re

from harness.adopt.shapes import Shape

PATH = ".github/workflows/servegate.yml"
BUDGET_MINUTES = 45
TEMPLATE = """\
# Gates every pull request: servegate builds the pull request's base and head as servegate.toml
# says, starts each cold in every round, loads both with the same suite and comments the verdict
# (exit 1 on a regression). Written by `harness init`; check the runner, the suite and the budget
# (`harness check` measures what a gate costs on your machine).
name: servegate

on:
  pull_request:

permissions:
  contents: read
  pull-requests: write  # the verdict as a comment on the pull request

concurrency:  # a new push to a pull request stops the gate still running for the last one
  group: servegate-${{ github.ref }}
  cancel-in-progress: true

jobs:
  gate:
@RUNNER@
    timeout-minutes: 60  # the budget below, the builds' setup and the report
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0  # the base branch's commits: both arms are built from this clone
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
@MODEL@      - uses: @ACTION@
        with:
          suites: @SUITE@  # shipped suites: `harness suites`; or paths to your own .toml
          budget-minutes: @BUDGET@  # builds included: the rounds are planned to end inside it
@EXTRAS@          # also: base (default: the pull request's base branch), head (default: HEAD),
          # project (default: servegate.toml), comment and history ("true"/"false"),
          # args (more arguments for `harness ab`, such as "--devices 0,1")
"""
GPU_RUNNER = """\
    # check: a GPU server needs a self-hosted runner with a GPU; these are its labels. A pull
    # request's code is built and run there: one from a fork runs only once it is pushed to a
    # branch of this repository by someone who read it (GitHub's advice for self-hosted runners)
    if: >-
      github.event_name != 'pull_request' ||
      github.event.pull_request.head.repo.full_name == github.repository
    runs-on: [self-hosted, gpu]"""
CPU_RUNNER = """\
    # check: GitHub's hosted runner (2 to 4 cores); a busy runner makes a noisy gate
    runs-on: ubuntu-latest"""


GPU_EXTRAS = """\
          extras: gpu  # nvidia-ml-py: each arm's device memory read through NVML
"""
MODEL_STEP = """\
      # check: the model servegate.toml names must be on the runner (or a step here fetch it)
"""


ACTION = "servegate/servegate@v1"  # the major tag the release workflow moves to each v1.x.y
ACTION_REF = re.compile(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[\w./-]+|\./[\w./-]+")


def workflow_text(shape: Shape, action: str = ACTION) -> str:
    runner = GPU_RUNNER if shape.gpu else CPU_RUNNER
    return (
        TEMPLATE.replace("@ACTION@", action)
        .replace("@RUNNER@", runner)
        .replace("@MODEL@", MODEL_STEP if shape.model else "")
        .replace("@EXTRAS@", GPU_EXTRAS if shape.gpu else "")
        .replace("@SUITE@", shape.suite)
        .replace("@BUDGET@", str(BUDGET_MINUTES))
    )
