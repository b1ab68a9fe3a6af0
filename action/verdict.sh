#!/usr/bin/env bash
# The step fails with the worst suite's exit code: 1 on a regression, 2 on an invalid run.
exit "${SERVEGATE_CODE:-0}"
