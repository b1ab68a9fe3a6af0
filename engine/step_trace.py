"""StepTrace: every forward the scheduler runs, as JSON lines (`--step-trace FILE`).

One line per scheduler tick that ran a forward: its kind (prefill_batched, prefill_single,
prefill_chunked, decode), each row's new tokens and the tokens already in its slot, and the
tick's seconds (the forward, then sampling and streaming each row's token: what a simulated
step must cost). The simulator's cost models are fitted to these (harness sim calibrate).
"""

import json
import threading


class StepTrace:
    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)  # noqa: SIM115 (open for the engine's life)
        self.lock = threading.Lock()

    def write(self, kind: str, tokens: list[int], offsets: list[int], seconds: float) -> None:
        line = json.dumps({"kind": kind, "tokens": tokens, "offsets": offsets, "s": seconds})
        with self.lock:
            self.file.write(line + "\n")
