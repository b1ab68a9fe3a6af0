"""Single-request generation straight on a backend: chunked prefill, then decode to a stop."""

from collections.abc import Iterator
from dataclasses import dataclass

from engine.backends.base import Backend
from engine.model.tokenizer import Tokenizer
from engine.sampler import Sampler, SamplingParams


@dataclass
class Generated:
    token: int
    text: str  # new text this token completed (may be empty mid-way through a UTF-8 char)


def generate(
    backend: Backend,
    tokenizer: Tokenizer,
    prompt: list[int],
    max_tokens: int,
    sampling: SamplingParams | None = None,
    chunk_size: int = 512,
    ignore_eos: bool = False,
    seq_id: int = 0,
) -> Iterator[Generated]:
    backend.add_sequence(seq_id, len(prompt) + max_tokens)
    try:
        for start in range(0, len(prompt), chunk_size):
            logits = backend.prefill(seq_id, prompt[start : start + chunk_size])
        sampler, stream = Sampler(sampling or SamplingParams()), tokenizer.stream()
        for i in range(max_tokens):
            token = sampler(logits)
            if token in tokenizer.eos_ids and not ignore_eos:
                return
            yield Generated(token, stream.step(tokenizer.backend, token) or "")
            if i + 1 < max_tokens:
                logits = backend.decode([seq_id], [token])[0]
    finally:
        backend.remove_sequence(seq_id)
