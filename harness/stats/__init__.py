"""Statistics and verdicts: intervals, sequential stopping, verdict rules, the gate, power."""
