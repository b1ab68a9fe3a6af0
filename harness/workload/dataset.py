"""Prompts from a local dataset file, sampled by seed: the ShareGPT JSON shape (a list of
`{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}`, the
first human turn is the prompt and the reply sets the output length) or JSON lines of
`{"prompt": ..., "output_length": N}` (`output_length` optional), or of lengths alone,
`{"input_length": N, "output_length": M}`, whose prompts are generated to N tokens of the
server's tokenizer (a length distribution, such as suites/lengths/). Read and checked whole."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from harness.files import read_capped

MAX_DATASET_BYTES = 512 * 2**20


class DatasetError(ValueError):
    """A dataset that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True, slots=True)
class Item:
    prompt: str  # "": generated, `input_length` tokens long
    output_length: int | None = None  # tokens; None: count `reply`, else the phase's max_tokens
    reply: str | None = None  # ShareGPT's answer: its length in the server's tokens is the output
    input_length: int | None = None  # a row of lengths alone: the prompt's tokens


@dataclass(frozen=True, slots=True)
class Dataset:
    path: str
    digest: str  # sha256 of the file's bytes
    items: tuple[Item, ...]

    @property
    def lengths_only(self) -> bool:
        """Rows of lengths alone: each prompt is generated, as a phase's drawn lengths are."""
        return all(item.input_length is not None for item in self.items)

    def sample(self, n: int, seed: int) -> list[Item]:
        """n items drawn by `seed`: without replacement while there are enough, then again."""
        rng, out = random.Random(seed), list[Item]()
        while len(out) < n:
            order = list(range(len(self.items)))
            rng.shuffle(order)
            out += [self.items[i] for i in order[: n - len(out)]]
        return out


def _sharegpt(doc: list, where: str) -> list[Item]:
    items = []
    for k, entry in enumerate(doc):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            raise DatasetError(f"{where}[{k}]: no conversations list (the ShareGPT shape)")
        texts = [t.get("value") for t in turns if isinstance(t, dict)]
        if len(texts) >= 1 and isinstance(texts[0], str) and texts[0].strip():
            reply = texts[1] if len(texts) > 1 and isinstance(texts[1], str) else None
            items.append(Item(texts[0], None, reply))
    return items


def _jsonl(text: str, where: str) -> list[Item]:
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise DatasetError(f"{where}:{n}: not JSON (a JSON array or JSON lines)") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{where}:{n}: needs a JSON object")
        prompt, given = row.get("prompt"), row.get("input_length")
        if (prompt is None) == (given is None):
            raise DatasetError(f"{where}:{n}: needs a prompt or an input_length, not both")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            raise DatasetError(f"{where}:{n}: needs a non-empty string prompt")
        for key in ("input_length", "output_length"):
            if row.get(key) is not None and not _whole(row[key]):
                raise DatasetError(f"{where}:{n}: {key} must be an integer >= 1")
        items.append(Item(prompt or "", row.get("output_length"), None, given))
    return items


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def read_dataset(path: Path) -> Dataset:
    path = Path(path)
    data = read_capped(path, MAX_DATASET_BYTES, "dataset", DatasetError)
    text = data.decode("utf-8", "replace")
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    items = _sharegpt(doc, str(path)) if isinstance(doc, list) else _jsonl(text, str(path))
    if not items:
        raise DatasetError(f"{path}: no prompts")
    return Dataset(str(path), hashlib.sha256(data).hexdigest()[:16], tuple(items))
