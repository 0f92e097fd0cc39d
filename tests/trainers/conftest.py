"""Fixtures for the trainer tests: a tiny random-weight model with a locally trained tokenizer."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the trainer tests need the 'train' extra (torch)")
pytest.importorskip("transformers", reason="the trainer tests need the 'train' extra (transformers)")
pytest.importorskip("peft", reason="the trainer tests need the 'train' extra (peft)")


def _quiet_transformers() -> None:
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()


_quiet_transformers()
torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A tiny Llama-architecture model (random weights) + word-level tokenizer for Signalling."""
    from llm_trainers.tiny import build_tiny_model, env_corpus

    path = tmp_path_factory.mktemp("tiny_signalling")
    build_tiny_model(path, env_corpus("llm/Signalling-v0", episodes=60, rounds=2), seed=0)
    return str(path)
