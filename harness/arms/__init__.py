"""Arms: what server a run measures, its git worktree, its cold start and teardown."""
