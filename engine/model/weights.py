"""Weights: a model's float32 matrices by HF name, the quantized ones decoded when read.

A GGUF's Q4_1 and Q8_0 matrices stay in the file's map until a backend reads one (LazyMap);
a backend that wants floats reads them one at a time, so neither a float32 copy of the model
nor a decoded copy of its codes ever sits in memory at once.
"""

from collections.abc import Callable, Iterator, Mapping

import numpy as np

from engine.model.q4 import Q4Weight
from engine.model.q8 import Q8Weight


class LazyMap(Mapping):
    """name -> value, each made by its function when read (not kept)."""

    def __init__(self, make: dict[str, Callable]):
        self.make = make

    def __getitem__(self, name: str):
        return self.make[name]()

    def __contains__(self, name: object) -> bool:  # Mapping's would make the value
        return name in self.make

    def __iter__(self) -> Iterator[str]:
        return iter(self.make)

    def __len__(self) -> int:
        return len(self.make)


class Weights(Mapping):
    def __init__(
        self,
        dense: dict[str, np.ndarray],
        quantized: Mapping[str, Q4Weight | Q8Weight],  # a LazyMap: decoded when read
        param_count: int,
    ):
        self.dense, self.quantized, self.param_count = dense, quantized, param_count

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.quantized:
            return self.quantized[name].dequantize()
        return self.dense[name]

    def __contains__(self, name: object) -> bool:  # Mapping's would dequantize
        return name in self.dense or name in self.quantized

    def __iter__(self) -> Iterator[str]:
        yield from self.dense
        yield from self.quantized

    def __len__(self) -> int:
        return len(self.dense) + len(self.quantized)
