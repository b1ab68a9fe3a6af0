"""The one error of reading or comparing results: its message is one line, and a CLI verb ends
with exit 2 on it (the input was invalid, nothing was judged)."""


class ComparisonError(ValueError):
    """Inputs that must never be compared: different workloads, bad tolerances, a saved result
    that is damaged, hand-edited or of an unknown schema."""
