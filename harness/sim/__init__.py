"""Simulation: a suite run through the reference engine's own scheduler on a virtual clock
(`python -m engine.sim`, in the arm's checkout), read back as the run JSON `harness run` writes."""
