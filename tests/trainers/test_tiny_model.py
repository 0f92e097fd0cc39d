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


def test_a_padded_vocabulary_and_a_bf16_draw_load_back_like_a_real_models(tmp_path):
    """The real-size benchmark models (benchmarks/train_step.py --gpu): a word-level tokenizer
    padded with filler words to a real vocabulary size, weights drawn in bf16 on a chosen device."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_trainers.tiny import build_tiny_model

    words = ["the speaker names a symbol", "listener answers red"]
    path = build_tiny_model(tmp_path / "padded", words, arch="qwen3", vocab_size=1000, dtype="bfloat16",
                            device="cpu", tie_word_embeddings=True)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert len(tokenizer) == model.config.vocab_size == 1000
    assert model.dtype == torch.bfloat16 and model.get_output_embeddings().weight.shape[0] == 1000
    # The corpus's words keep their ids and round-trip; filler ids decode to their filler word.
    ids = tokenizer("listener answers red", add_special_tokens=False)["input_ids"]
    assert max(ids) < 20 and tokenizer.decode(ids) == "listener answers red"
    assert tokenizer.decode([999]) == "<extra_999>"
    assert tokenizer.decode([tokenizer.eos_token_id, 999], skip_special_tokens=True) == "<extra_999>"
    with pytest.raises(ValueError, match="below the corpus"):
        build_tiny_model(tmp_path / "small", words, vocab_size=5)
