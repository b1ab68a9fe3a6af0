"""The engine's own scheduler on a virtual clock: a backend that computes nothing and advances
the clock by a cost model's seconds for each forward (`python -m engine.sim`)."""
