"""OpenAI request validation and response shapes; no I/O, no model."""

import time
import uuid
from dataclasses import dataclass, field

from engine.sampler import SamplingParams

CHAT_DEFAULT_MAX_TOKENS = 512
COMPLETION_DEFAULT_MAX_TOKENS = 16
MAX_STOPS = 4  # OpenAI's limit on stop strings
MAX_STOP_CHARS = 256 * 1024  # per stop string: bounds the per-request KMP tables
SEED_RANGE = (0, 2**64)  # numpy's generator takes a non-negative seed
# Fields we do not implement: a value other than these is answered 400, as vLLM does.
UNSUPPORTED = {
    "best_of": (None, 1),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0),
    "repetition_penalty": (None, 1),
    "logit_bias": (None, {}),
    "tools": (None, []),
    "functions": (None, []),
    "tool_choice": (None, "none"),
    "suffix": (None, ""),
    "response_format": (None, {"type": "text"}),
}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        type_: str = "invalid_request_error",
        code: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.type, self.code = (
            status,
            message,
            param,
            type_,
            code,
        )

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass
class GenerationRequest:
    chat: bool
    prompt: str | list[int] | None = None
    messages: list[dict] = field(default_factory=list)
    max_tokens: int = COMPLETION_DEFAULT_MAX_TOKENS
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    stream: bool = False
    include_usage: bool = False
    model: str | None = None


def _typed(body: dict, key: str, types, default=None, check=None, rule: str = ""):
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        names = " or ".join(t.__name__ for t in types)
        raise ApiError(400, f"'{key}' must be {names}", key)
    if check is not None and not check(value):
        raise ApiError(400, f"'{key}' {rule}", key)
    return value


def text(value: str, key: str) -> str:
    """A string the tokenizer can take: a lone surrogate ("\\ud800") is the client's mistake."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"'{key}' is not valid Unicode (a lone surrogate)", key) from None
    return value


def _content(m: dict) -> str:
    content = m.get("content")
    if content is None and m["role"] == "assistant":  # e.g. a message that only has tool_calls
        return ""
    if isinstance(content, list):  # content parts: text only
        if not all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in content
        ):
            raise ApiError(400, "content parts must be {'type': 'text', 'text': str}", "messages")
        content = "".join(p["text"] for p in content)
    if not isinstance(content, str):
        raise ApiError(400, "each message needs string 'content'", "messages")
    return text(content, "messages")


def _messages(body: dict) -> list[dict]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ApiError(400, "'messages' must be a non-empty list", "messages")
    out = []
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(400, "each message needs a string 'role'", "messages")
        out.append({"role": text(m["role"], "messages"), "content": _content(m)})
    return out


def _stop(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is None:
        return ()
    if (
        not isinstance(stop, list)
        or len(stop) > MAX_STOPS
        or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in stop)
    ):
        raise ApiError(
            400,
            f"'stop' must be a string or up to {MAX_STOPS} non-empty strings "
            f"of at most {MAX_STOP_CHARS} characters",
            "stop",
        )
    return tuple(text(s, "stop") for s in stop)


def _unsupported(body: dict) -> None:
    for key, fine in UNSUPPORTED.items():
        value = body.get(key)
        if not any(value == f and isinstance(value, bool) == isinstance(f, bool) for f in fine):
            raise ApiError(400, f"'{key}' is not supported by this engine", key)


def _prompt(body: dict) -> str | list[int]:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
        p = p[0]
    if isinstance(p, str):
        if not p:
            raise ApiError(400, "'prompt' must not be empty", "prompt")
        return text(p, "prompt")
    if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
        return p
    raise ApiError(400, "'prompt' must be a non-empty string or a list of token ids", "prompt")


def parse_request(body: object, chat: bool) -> GenerationRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if _typed(body, "n", (int,), 1) != 1:
        raise ApiError(400, "only n=1 is supported", "n")
    _unsupported(body)
    default_max = CHAT_DEFAULT_MAX_TOKENS if chat else COMPLETION_DEFAULT_MAX_TOKENS
    max_tokens = _typed(body, "max_completion_tokens", (int,), None) if chat else None
    if max_tokens is None:
        max_tokens = _typed(body, "max_tokens", (int,), default_max)
    if max_tokens < 1:
        raise ApiError(400, "'max_tokens' must be >= 1", "max_tokens")
    temperature = _typed(
        body, "temperature", (int, float), 1.0, lambda v: 0 <= v <= 2, "must be in [0, 2]"
    )
    top_p = _typed(body, "top_p", (int, float), 1.0, lambda v: 0 < v <= 1, "must be in (0, 1]")
    seed = _typed(
        body,
        "seed",
        (int,),
        None,
        lambda v: SEED_RANGE[0] <= v < SEED_RANGE[1],
        "must be in [0, 2**64)",
    )
    opts = _typed(body, "stream_options", (dict,), {})
    return GenerationRequest(
        chat=chat,
        prompt=None if chat else _prompt(body),
        messages=_messages(body) if chat else [],
        max_tokens=max_tokens,
        sampling=SamplingParams(float(temperature), float(top_p), seed),
        stop=_stop(body),
        ignore_eos=_typed(body, "ignore_eos", (bool,), False),
        stream=_typed(body, "stream", (bool,), False),
        include_usage=opts.get("include_usage") is True,
        model=_typed(body, "model", (str,), None),
    )


def completion_id(chat: bool) -> str:
    return ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]


def usage(prompt_tokens: int, completion_tokens: int, cached: int = 0) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def chunk(
    rid: str, model: str, chat: bool, text: str | None, finish: str | None, role: bool = False
) -> dict:
    if chat:
        delta = {"role": "assistant", "content": ""} if role else {}
        if text:
            delta["content"] = text
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish, "logprobs": None}
    return {
        "id": rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }


def full_response(rid: str, model: str, chat: bool, text: str, finish: str, use: dict) -> dict:
    if chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish,
        }
    else:
        choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
    return {
        "id": rid,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": use,
    }
