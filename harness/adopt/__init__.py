"""Adopting servegate in a server's own repository: what `harness init` recognises there and
the project file and CI workflow it writes for it, and what `harness check` estimates a gate
costs."""
