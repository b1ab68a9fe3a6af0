"""The workload: suites, their schema, counter expectations, the workload fingerprint."""
