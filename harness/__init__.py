"""servegate's harness: start an inference server cold, load it with streaming clients, measure."""

__version__ = "0.1.0"
