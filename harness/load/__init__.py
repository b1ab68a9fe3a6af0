"""One phase's load and its sampling: prompts, requests fired, RSS, counters, metrics."""
