"""A small OpenAI-compatible server written the way a team writes one with FastAPI: an `app`
module-level object, run by uvicorn (`uvicorn app.main:app`), streaming `/v1/completions` and
`/v1/chat/completions` as server-sent events, `/v1/models`, `/health` and vLLM's `/tokenize`
(a token is a word). The throwaway repository of tests/helpers/adopt_repos.py commits it as
app/main.py; its dependencies (fastapi, uvicorn) come from its requirements.txt."""

import asyncio
import json
import os

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

app = FastAPI()
MODEL = os.environ.get("MODEL", "tiny-model")
ITL_S = 0.002


def words(text: str) -> int:
    return len(text.split())


def prompt_tokens(body: dict) -> int:
    if "messages" in body:
        return sum(words(m["content"]) + 3 for m in body["messages"])
    return words(str(body.get("prompt", "")))


@app.get("/health")
async def health() -> dict:
    return {"status": "ok"}


@app.get("/v1/models")
async def models() -> dict:
    return {"object": "list", "data": [{"id": MODEL}]}


@app.post("/tokenize")
async def tokenize(request: Request) -> dict:
    n = prompt_tokens(await request.json())
    return {"tokens": list(range(n)), "count": n, "max_model_len": 4096}


async def events(body: dict, chat: bool):
    key, n = ("delta", "chat.completion.chunk") if chat else ("text", "text_completion")
    max_tokens = int(body.get("max_tokens", 16))
    for i in range(max_tokens):
        await asyncio.sleep(ITL_S)
        piece = {"content": " tok"} if chat else " tok"
        last = "length" if i == max_tokens - 1 else None
        choice = {"index": 0, key: piece, "finish_reason": last}
        yield f"data: {json.dumps({'object': n, 'choices': [choice]})}\n\n"
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": prompt_tokens(body), "completion_tokens": max_tokens}
        yield f"data: {json.dumps({'object': n, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


@app.post("/v1/completions")
async def completions(request: Request) -> StreamingResponse:
    return StreamingResponse(events(await request.json(), False), media_type="text/event-stream")


@app.post("/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    return StreamingResponse(events(await request.json(), True), media_type="text/event-stream")
