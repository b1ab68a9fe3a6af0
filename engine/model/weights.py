"""Weights: a model's float32 matrices by HF name, the quantized ones dequantized when read.

A GGUF's Q4_1 and Q8_0 matrices are kept as stored (their codes are a quarter to a half of
float32's bytes); a backend that wants floats reads them one at a time, so a whole float32
copy of the model never sits in memory (it was most of the engine's peak RSS at load).
"""

from collections.abc import Iterator, Mapping

import numpy as np

from engine.model.q4 import Q4Weight
from engine.model.q8 import Q8Weight


class Weights(Mapping):
    def __init__(self, dense: dict[str, np.ndarray], quantized: dict[str, Q4Weight | Q8Weight]):
        self.dense, self.quantized = dense, quantized

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.quantized:
            return self.quantized[name].dequantize()
        return self.dense[name]

    def __iter__(self) -> Iterator[str]:
        yield from self.dense
        yield from self.quantized

    def __len__(self) -> int:
        return len(self.dense) + len(self.quantized)

    @property
    def param_count(self) -> int:
        return sum(w.size for w in self.dense.values()) + sum(
            q.q.size for q in self.quantized.values()
        )
