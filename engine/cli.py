"""`engine` command line: generate | info | serve."""

import sys
import time

import click

from engine import __version__
from engine.backends import BACKENDS, load_backend
from engine.model.load import BUILTIN_MODELS, DEFAULT_MODEL, load_model


class FlagError(click.ClickException):
    """A bad serving flag: one line on stderr, exit 2 (a usage error, not a failure)."""

    exit_code = 2


# Connections the kernel queues before the server accepts them: a client's burst of hundreds
# of streams connects at once, and aiohttp's default (128) drops the rest's SYNs, which retry a
# second later (uvicorn, under vLLM and SGLang, keeps 2048).
LISTEN_BACKLOG = 2048
MODEL_HELP = f"Built-in name ({', '.join(BUILTIN_MODELS)}), a .gguf file or an HF directory."


def load(model: str, backend: str, device: str, dtype: str):
    try:
        loaded = load_model(model)
        return loaded, load_backend(backend, loaded, device=device, dtype=dtype)
    except (ValueError, ImportError, OSError) as e:
        raise click.ClickException(str(e)) from None


def model_options(f):
    f = click.option(
        "--dtype",
        default="auto",
        show_default=True,
        help="float32 | bfloat16 | float16 | int4 (auto: bf16 on CUDA; with avx512_bf16/AMX "
        "int4 for Q4_1 models, else bf16; float32 elsewhere).",
    )(f)
    f = click.option(
        "--device",
        default="auto",
        show_default=True,
        help="torch: cpu | cuda[:N]; mlx: cpu | gpu (auto picks the accelerator).",
    )(f)
    f = click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default="auto",
        show_default=True,
        help="auto: mlx on Apple silicon, torch elsewhere.",
    )(f)
    return click.option("--model", default=DEFAULT_MODEL, show_default=True, help=MODEL_HELP)(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="engine")
def main():
    """servegate's reference inference engine."""


@main.command()
@model_options
@click.option("--max-tokens", default=128, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--chat/--no-chat",
    default=True,
    show_default=True,
    help="Apply the model's chat template (ignored when the model has none).",
)
@click.option("--temperature", default=0.0, show_default=True, type=click.FloatRange(min=0))
@click.option("--top-p", default=1.0, show_default=True, type=click.FloatRange(0, 1, min_open=True))
@click.option("--seed", default=None, type=int)
@click.argument("prompt")
def generate(model, backend, device, dtype, max_tokens, chat, temperature, top_p, seed, prompt):
    """Print the model's completion of PROMPT (streamed), then speed on stderr."""
    from engine.generate import generate as run
    from engine.sampler import SamplingParams

    loaded, be = load(model, backend, device, dtype)
    tok = loaded.tokenizer
    if chat and tok.chat_template:
        prompt = tok.apply_chat_template([{"role": "user", "content": prompt}])
    ids = tok.encode(prompt)
    if len(ids) + max_tokens > loaded.args.max_position_embeddings:
        raise click.ClickException(
            f"prompt ({len(ids)} tokens) + max tokens exceeds the context "
            f"({loaded.args.max_position_embeddings})"
        )
    t0, n = time.perf_counter(), 0
    for out in run(be, tok, ids, max_tokens, SamplingParams(temperature, top_p, seed)):
        n += 1
        click.echo(out.text, nl=False)
    dt = time.perf_counter() - t0
    click.echo()
    click.echo(f"[{n} tokens in {dt:.2f}s on {be.name}/{be.device}/{be.dtype}]", err=True)


@main.command()
@model_options
def info(model, backend, device, dtype):
    """Print the resolved model, backend, device, dtype and parameter count."""
    loaded, be = load(model, backend, device, dtype)
    a = loaded.args
    rows = {
        "model": loaded.name,
        "source": loaded.source,
        "backend": be.name,
        "device": be.device,
        "dtype": be.dtype,
        "parameters": f"{loaded.param_count:,}",
        "layers": a.num_hidden_layers,
        "hidden": a.hidden_size,
        "heads / kv heads": f"{a.num_attention_heads} / {a.num_key_value_heads}",
        "vocab": a.vocab_size,
        "context": a.max_position_embeddings,
        "rope theta": a.rope_theta,
        "tied embeddings": a.tie_word_embeddings,
        "chat template": "yes" if loaded.tokenizer.chat_template else "no",
    }
    for k, v in rows.items():
        click.echo(f"{k:>16}: {v}")


SERVE_OPTIONS = [
    ("--host", str, "Address to bind.", "127.0.0.1"),
    ("--port", int, "Port to listen on.", "8000"),
    ("--parallel", int, "Max sequences holding a slot (decoding or prefilling) at once.", "4"),
    ("--max-batch-prefill", int, "Max rows in one padded batched prefill; 1 disables it.", "4"),
    (
        "--max-batch-prefill-tokens",
        int,
        "Cap on rows*max_len of a batched-prefill cohort; 0 = uncapped.",
        "2*max_batch_prefill*prefill_chunk_size",
    ),
    ("--prefill-chunk-size", int, "Chunk size for single-sequence (chunked) prefill.", "512"),
    (
        "--prefill-max-seqs",
        int,
        "Max waiting sequences admitted to prefill per tick; 0 = no cap.",
        "0",
    ),
    (
        "--prefill-grant-interval",
        int,
        "A parked chunked prefill gets one chunk after this many decode ticks.",
        "16",
    ),
    (
        "--batch-window-ms",
        float,
        "An idle engine holds its first arrival this long for companions to batch with; "
        "it admits at once when a full cohort is queued. 0 disables.",
        "10",
    ),
    ("--ctx-size", int, "Per-sequence context limit; 0 = the model's context.", "0"),
    ("--max-queue-depth", int, "Queued requests beyond this get HTTP 503 + Retry-After.", "32"),
    (
        "--kv-cache-budget",
        str,
        "Admission control on live KV: auto (half the free memory), none, or bytes (e.g. 2GiB).",
        "auto",
    ),
    (
        "--prompt-cache-bytes",
        str,
        "Byte budget of the prompt-prefix cache: auto (the KV of one full context of the model, "
        "at most a tenth of the memory free after loading) or bytes (e.g. 512MiB).",
        "auto",
    ),
    (
        "--api-key",
        str,
        "When set, every endpoint but /health and /metrics requires 'Authorization: Bearer KEY'; "
        "must not be empty.",
        "none",
    ),
    ("--max-body-bytes", str, "Request bodies over this get HTTP 413.", "4MiB"),
    (
        "--drain-seconds",
        float,
        "On SIGTERM, time given to in-flight requests before cancelling.",
        "3",
    ),
    (
        "--read-timeout",
        float,
        "Seconds for a request's body to arrive (else HTTP 408); a connection that has not "
        "sent a whole request (or idles between requests) this long is closed.",
        "60",
    ),
    (
        "--step-trace",
        str,
        "Append every forward (kind, rows' new and cached tokens, seconds) to this file as JSON "
        "lines: what `harness sim calibrate` fits its cost model to.",
        "none",
    ),
]


def serve_options(f):
    for name, kind, text, default in reversed(SERVE_OPTIONS):
        env = "ENGINE_" + name[2:].upper().replace("-", "_")
        f = click.option(
            name, type=kind, default=None, help=f"{text} [default: {default}; env: {env}]"
        )(f)
    f = click.option(
        "--no-prompt-cache",
        "no_prompt_cache",
        is_flag=True,
        default=None,
        help="Turn the prompt-prefix cache off [env: ENGINE_PROMPT_CACHE=0].",
    )(f)
    f = click.option(
        "--no-batch",
        is_flag=True,
        default=False,
        help="Serve one sequence at a time (--parallel 1).",
    )(f)
    return f


@main.command()
@click.option(
    "--model", default=None, help=MODEL_HELP + " [default: smollm2-135m; env: ENGINE_MODEL]"
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=None,
    help="auto: mlx on Apple silicon, torch elsewhere. [env: ENGINE_BACKEND]",
)
@click.option("--device", default=None, help="cpu | cuda[:N] | gpu; auto picks the accelerator.")
@click.option("--dtype", default=None, help="float32 | bfloat16 | float16 | int4 | auto.")
@serve_options
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
)
def serve(no_batch, no_prompt_cache, log_level, **flags):
    """Run the OpenAI-compatible server (continuous batching, batched and chunked prefill).

    Precedence for every setting: flag > ENGINE_<FLAG> environment variable > default.
    Endpoints and metrics: docs/http-api.md.
    """
    import gc
    import logging
    import os

    from aiohttp import web

    from engine.config import ConfigError, resolve_config
    from engine.server import ENGINE, build_app

    if no_batch:
        flags["parallel"] = 1
    if no_prompt_cache:
        flags["prompt_cache"] = False
    try:
        config = resolve_config(flags, os.environ)
    except ConfigError as e:
        raise FlagError(str(e)) from None
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    if config.exposed and not config.api_key:
        logging.getLogger("engine").warning(
            "engine: listening on %s without --api-key: anyone who can reach this port "
            "can use the engine",
            config.host,
        )
    app = build_app(config)
    web.run_app(
        app,
        host=config.host,
        port=config.port,
        shutdown_timeout=config.drain_seconds + 5,
        keepalive_timeout=config.read_timeout,  # aiohttp's timer also bounds header reads
        # a compressed body is the handler's to refuse (415, engine/guards.py): aiohttp's own
        # parser would inflate gzip and deflate, and answer br and zstd itself with a bare 400
        auto_decompress=False,
        backlog=LISTEN_BACKLOG,
        print=lambda msg: click.echo(f"engine: {msg}", err=True),
        access_log=None,
    )
    if app[ENGINE].load_error:
        raise click.ClickException(f"could not load the model: {app[ENGINE].load_error}")
    # Shut down: the interpreter's teardown would walk every object torch made for ~0.6 s
    # before exiting (a cold A/B pays it per server); frozen, they are left to the OS.
    gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
