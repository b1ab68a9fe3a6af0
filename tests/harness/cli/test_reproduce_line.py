"""The command a report records to reproduce it: the same in any clone, from the repository's
root (paths relative, temporary outputs and defaults dropped, the interpreter by its name)."""

from pathlib import Path

from harness.cli.command_line import portable_command

CWD = Path("/home/u/repo")
PYTHON = "/home/u/repo/.venv/bin/python"
FLAGS = frozenset({"--quiet", "--null-arm"})


def line(*argv: str) -> str:
    return portable_command(list(argv), CWD, PYTHON, "/tmp", FLAGS)


def test_temporary_outputs_and_the_default_out_dir_are_dropped():
    assert line("ab", "--quiet", "--suite", "prefill-storm", "--head-flags",
                "--prefill-max-seqs 4", "--out-dir", "/tmp/storm/results", "--summary",
                "/tmp/storm/summary.md") == (
        "harness ab --quiet --suite prefill-storm --head-flags '--prefill-max-seqs 4'"
    )  # fmt: skip
    assert line("ab", "--out-dir=/home/u/repo/results") == "harness ab"
    assert line("sweep", "--out-dir", "results", "--levels", "1,2") == "harness sweep --levels 1,2"
    runner = ("/tmp", "/home/runner/work/_temp")  # a GitHub runner's $RUNNER_TEMP is its own
    said = portable_command(
        [
            "ab",
            "--out-dir",
            "/home/runner/work/_temp/servegate/chat",
            "--summary",
            "/home/runner/work/_temp/s.md",
        ],
        CWD,
        PYTHON,
        runner,
    )
    assert said == "harness ab"  # fmt: skip


def test_paths_in_the_repository_are_relative_and_others_kept():
    assert line("ab", "--out-dir", "/home/u/repo/out/ab", "--suite", "/home/u/repo/s.toml") == (
        "harness ab --out-dir out/ab --suite s.toml"
    )
    assert line("report", "/home/u/repo/results/r.json", "--out-dir", "/srv/reports") == (
        "harness report results/r.json --out-dir /srv/reports"
    )
    kept = "harness ab --summary /home/u/summary.md"
    assert line("ab", "--summary", "/home/u/summary.md") == kept


def test_the_interpreter_in_a_command_is_python_and_flag_values_are_left_alone():
    assert line("ab", "--base-cmd", f"{PYTHON} /home/u/repo/srv.py --port {{port}}",
                "--head-cmd=llama-server -m /models/m.gguf --port {port}") == (
        "harness ab --base-cmd '{python} srv.py --port {port}' "
        "'--head-cmd=llama-server -m /models/m.gguf --port {port}'"
    )  # fmt: skip
    assert line("ab", "--null-arm", "--head-flags", "--x=/home/u/repo/a") == (
        "harness ab --null-arm --head-flags --x=/home/u/repo/a"
    )
