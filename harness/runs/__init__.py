"""Runs: one arm started cold through a suite (run.py) and the A/B rounds of two (ab.py)."""
