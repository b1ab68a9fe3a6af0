"""ModelArgs: the hyperparameters of a Llama-family model, shared by every backend."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelArgs:
    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = True
    head_dim: int = 0

    def __post_init__(self):
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        assert self.num_attention_heads % self.num_key_value_heads == 0, "GQA needs H % KVH == 0"
        assert self.head_dim % 2 == 0, "RoPE needs an even head_dim"

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of K and V one token occupies across all layers, per byte of element size."""
        return 2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim

    @classmethod
    def from_hf_config(cls, cfg: dict) -> "ModelArgs":
        return cls(
            hidden_size=cfg["hidden_size"],
            num_hidden_layers=cfg["num_hidden_layers"],
            intermediate_size=cfg["intermediate_size"],
            num_attention_heads=cfg["num_attention_heads"],
            num_key_value_heads=cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
            vocab_size=cfg["vocab_size"],
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-5),
            rope_theta=cfg.get("rope_theta", 10000.0),
            max_position_embeddings=cfg.get("max_position_embeddings", 2048),
            tie_word_embeddings=cfg.get("tie_word_embeddings", False),
            head_dim=cfg.get("head_dim") or 0,
        )

    def to_hf_config(self) -> dict:
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "intermediate_size": self.intermediate_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "head_dim": self.head_dim,
        }
