"""Stop strings matched incrementally (KMP): each new character costs O(1) amortized per stop.

A sequence feeds only the text a token added, so stop handling is linear in the new text
whatever the stop strings' length. The prefix tables grow lazily: a state never exceeds the
characters fed, so a table is built only as far as the text has gone (no up-front cost for a
200,000-character stop string on an 8-token answer).
"""


def extend_prefix_table(pattern: str, fail: list[int], upto: int) -> None:
    """Grow fail so fail[i], for i < upto, is the length of the longest proper prefix of
    pattern[: i + 1] that is also its suffix."""
    if not fail:
        fail.append(0)
    for i in range(len(fail), min(upto, len(pattern))):
        k = fail[i - 1]
        while k and pattern[i] != pattern[k]:
            k = fail[k - 1]
        fail.append(k + 1 if pattern[i] == pattern[k] else k)


class StopMatcher:
    """Tracks, per stop string, how much of it the text seen so far ends with."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = stops
        self.tables: list[list[int]] = [[] for _ in stops]
        self.state = [0] * len(stops)  # matched prefix length of each stop
        self.seen = 0  # characters fed

    def feed(self, piece: str) -> int | None:
        """Feed new text; the index (in all text fed) where the first completed stop begins."""
        for stop, fail in zip(self.stops, self.tables, strict=True):
            extend_prefix_table(stop, fail, self.seen + len(piece))
        for ch in piece:
            self.seen += 1
            for j, stop in enumerate(self.stops):
                k, fail = self.state[j], self.tables[j]
                if k == len(stop):
                    k = fail[k - 1]
                while k and ch != stop[k]:
                    k = fail[k - 1]
                if ch == stop[k]:
                    k += 1
                self.state[j] = k
                if k == len(stop):
                    return self.seen - k
        return None

    def held(self) -> int:
        """Trailing characters that could still begin a stop string (never a whole stop)."""
        return max(self.state, default=0)
