"""A serving-latency gate as a pytest test (docs/pytest.md): the head build of a server against
the base build, each started by command, under one of servegate's suites. The commands and the
suite come from the environment so one file serves every build pair; `{port}` is filled in by
the harness, and relative paths resolve against pytest's rootdir.

    SERVEGATE_BASE_CMD="llama-server -m base.gguf --port {port}" \
    SERVEGATE_HEAD_CMD="llama-server -m head.gguf --port {port}" pytest test_serving.py
"""

import os

BASE_CMD = os.environ.get("SERVEGATE_BASE_CMD", "llama-server -m base.gguf --port {port}")
HEAD_CMD = os.environ.get("SERVEGATE_HEAD_CMD", "llama-server -m head.gguf --port {port}")
SUITE = os.environ.get("SERVEGATE_SUITE", "short-concurrency")


def test_head_serves_no_slower_than_base(servegate):
    result = servegate.ab(base_cmd=BASE_CMD, head_cmd=HEAD_CMD, suite=SUITE)
    assert result.verdict != "REGRESSION"
