"""`harness sweep`: load curves per level, the knee and goodput, a verdict per level."""
