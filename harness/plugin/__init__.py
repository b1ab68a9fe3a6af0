"""The harness as a pytest fixture: `harness ab` and `harness run` as a test's subprocess, their
saved results read back as typed records, each also kept in pytest-benchmark's shape."""
