"""The tiny random-weight models of ``llm_trainers.tiny`` behave like plain models when served."""

from __future__ import annotations

import pytest


def test_default_tiny_model_gets_no_reply_parser_from_transformers_serve(tmp_path):
    """``transformers serve`` parses replies with a per-architecture fallback template (found by
    ``model_type``); for Qwen types it echoed the prompt into the reply, so a random model
    "solved" Signalling through a real server. The default tiny model must get no such parser:
    its reply is the generated text and nothing else."""
    serving = pytest.importorskip(
        "transformers.cli.serving.utils", reason="this transformers has no `transformers serve`"
    )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_trainers.tiny import build_tiny_model

    path = build_tiny_model(tmp_path / "tiny", ["the speaker names a symbol", "listener answers"])
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert serving.get_response_template(tokenizer, model) is None, model.config.model_type


def test_tiny_model_rejects_an_unknown_architecture(tmp_path):
    from llm_trainers.tiny import build_tiny_model

    with pytest.raises(ValueError, match="unknown arch"):
        build_tiny_model(tmp_path / "tiny", ["a b c"], arch="gpt17")
