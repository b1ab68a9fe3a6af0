"""servegate's reference engine: a small, faithful continuous-batching LLM server."""

__version__ = "0.1.0"
