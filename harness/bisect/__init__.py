"""`harness bisect`: the commits searched, the halving rules, each step's A/B, the report."""
