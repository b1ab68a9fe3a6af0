"""Tokenizer: a `tokenizers` BPE plus the model's chat template (jinja2) and stop tokens."""

from dataclasses import dataclass, field

from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.decoders import DecodeStream

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Longer texts tokenize through encode_batch, which releases the GIL while it works, so a
# server tokenizing a huge body on a worker thread keeps its event loop answering.
RELEASE_GIL_CHARS = 65536


def _raise(message: str):
    raise ValueError(message)


@dataclass
class Tokenizer:
    backend: HFTokenizer
    eos_ids: frozenset[int]
    bos_token: str = ""
    eos_token: str = ""
    chat_template: str | None = None
    add_bos: bool = False
    bos_id: int | None = None
    _template: object = field(default=None, repr=False)

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        if len(text) > RELEASE_GIL_CHARS:  # encode holds the GIL; the batch calls release it
            batch = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
            ids = batch([text], add_special_tokens=False)[0].ids
        else:
            ids = self.backend.encode(text, add_special_tokens=False).ids
        if self.add_bos and self.bos_id is not None:
            ids = [self.bos_id, *ids]
        return ids

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode(ids, skip_special_tokens=True)

    def stream(self) -> DecodeStream:
        """An incremental detokenizer: `.step(tokenizer.backend, id)` -> new text or None."""
        return DecodeStream(skip_special_tokens=True)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        if self.chat_template is None:
            raise ValueError("this model has no chat template")
        if self._template is None:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            env.globals["raise_exception"] = _raise
            self._template = env.from_string(self.chat_template)
        return self._template.render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
