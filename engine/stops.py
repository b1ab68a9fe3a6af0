"""Stop strings matched incrementally (KMP): each new character costs O(1) amortized per stop.

A sequence feeds only the text a token added, so stop handling is linear in the new text
whatever the stop strings' length; the prefix tables cost O(len(stop)) once per request.
"""


def prefix_table(pattern: str) -> list[int]:
    """fail[i]: length of the longest proper prefix of pattern[: i + 1] that is also its suffix."""
    fail, k = [0] * len(pattern), 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = fail[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        fail[i] = k
    return fail


class StopMatcher:
    """Tracks, per stop string, how much of it the text seen so far ends with."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = stops
        self.tables = [prefix_table(s) for s in stops]
        self.state = [0] * len(stops)  # matched prefix length of each stop
        self.seen = 0  # characters fed

    def feed(self, piece: str) -> int | None:
        """Feed new text; the index (in all text fed) where the first completed stop begins."""
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
