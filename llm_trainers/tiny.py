"""Tiny causal LMs with random weights and a tokenizer trained on the spot, for CPU tests.

``build_tiny_model(path, texts)`` trains a word-level tokenizer on ``texts`` (plus chat special
tokens and a chat template), builds a small Llama (or Qwen3) decoder from a config with random
weights, and saves both with ``save_pretrained`` so that they load back with
``AutoModelForCausalLM.from_pretrained(path)`` / ``AutoTokenizer.from_pretrained(path)``, exactly
like a downloaded model. Nothing is downloaded.

Why Llama by default: servers pick reply parsers by ``model_type``. ``transformers serve`` parses
the replies of every ``qwen*`` type with a Qwen template (``<|im_start|>assistant`` anchors,
``<think>`` blocks) that our chat template does not produce, and it then returned the prompt as
part of the reply: a random-weight Qwen3 "solved" Signalling through a real server by echoing
the symbol it was shown. A ``llama`` model gets no fallback parser, so the reply is exactly the
generated text (tested). Pass ``arch="qwen3"`` for the Qwen3 layout (q/k norms) on a path that
does not go through such a server.

``env_corpus(env_id, ...)`` collects the instruction and prompt texts an environment produces
(over many seeds, driven by its reference and random agents), so a tokenizer trained on them
covers every word the environment can show.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model", "env_corpus"]

SPECIAL_TOKENS = ["<pad>", "<unk>", "<eos>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]

#: A minimal chat template: ``<|role|> content <|end|>`` per message, then ``<|assistant|>``.
#: The assistant ends its turn with ``<eos>``.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|> ' + message['content'] + ' <|end|> ' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def env_corpus(env_id: str, episodes: int = 200, seed: int = 0, **env_kwargs: Any) -> list[str]:
    """Instructions, prompts and actions seen while playing ``episodes`` of ``env_id``.

    Half of the episodes are played by the reference agent, half by the random agent.
    """
    import numpy as np

    import llm_envs

    rng = np.random.default_rng(seed)
    env = llm_envs.make(env_id, **env_kwargs)
    texts: list[str] = []
    for ep in range(episodes):
        env.reset(seed=seed + ep)
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            obs = env.observe(agent)
            texts += [obs["instruction"], obs["prompt"]]
            action = env.reference_action(agent) if ep % 2 == 0 else env.random_action(agent, rng)
            texts.append(action)
            env.step(action)
    return texts


def build_tiny_model(
    path: str | os.PathLike[str],
    texts: Iterable[str],
    *,
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 256,
    max_position_embeddings: int = 512,
    arch: str = "llama",
    tie_word_embeddings: bool = False,
    seed: int = 0,
    vocab_size: int | None = None,
    dtype: str | None = None,
    device: str | None = None,
) -> Path:
    """Train a word-level tokenizer on ``texts``, build a random-weight decoder, save both.

    Args:
        path: Output directory (created).
        texts: Training corpus for the tokenizer (every word becomes a token).
        hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size,
        max_position_embeddings: The decoder's shape.
        arch: ``"llama"`` (default: no server applies a model-specific reply parser to it) or
            ``"qwen3"``.
        tie_word_embeddings: Share the input embedding and the output head.
        seed: Seed of the random weights.
        vocab_size: Pad the vocabulary to this many tokens with filler words ``<extra_N>`` (a
            real model's vocabulary size makes the embedding and the output head as large as
            theirs, for speed and memory measurements). None: the corpus's words only.
        dtype: Weight dtype of the saved model (``"bfloat16"``, ``"float16"``, ``"float32"``);
            None saves float32. Building in bfloat16 halves the file of a large shape.
        device: Where the random weights are drawn (``"cuda"`` draws a large shape in seconds
            where a CPU takes minutes); None: the CPU. The weights differ from the CPU's draw.

    Returns:
        The directory, loadable with ``from_pretrained``.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins word tokens with single spaces
    trainer = trainers.WordLevelTrainer(special_tokens=SPECIAL_TOKENS, min_frequency=1)
    tok.train_from_iterator(list(texts), trainer=trainer)
    if vocab_size is not None:
        vocab = tok.get_vocab()
        if vocab_size < len(vocab):
            raise ValueError(f"vocab_size={vocab_size} is below the corpus's {len(vocab)} words")
        vocab.update({f"<extra_{i}>": i for i in range(len(vocab), vocab_size)})
        padded = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        padded.pre_tokenizer, padded.decoder = tok.pre_tokenizer, tok.decoder
        padded.add_special_tokens(SPECIAL_TOKENS)  # marks them special, ids unchanged
        tok = padded
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<eos>",
        additional_special_tokens=SPECIAL_TOKENS[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)

    common = {
        "vocab_size": len(fast),
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads,
        "max_position_embeddings": max_position_embeddings,
        "tie_word_embeddings": tie_word_embeddings,
        "bos_token_id": None,
        "eos_token_id": fast.eos_token_id,
        "pad_token_id": fast.pad_token_id,
        "attention_dropout": 0.0,
    }
    if arch == "qwen3":
        from transformers import Qwen3Config

        config = Qwen3Config(head_dim=hidden_size // num_heads, **common)
    elif arch == "llama":
        from transformers import LlamaConfig

        config = LlamaConfig(**common)
    else:
        raise ValueError(f"unknown arch {arch!r}; choose 'qwen3' or 'llama'")
    torch_dtype = getattr(torch, dtype) if dtype else torch.float32
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        with torch.device(device or "cpu"):
            model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    model.save_pretrained(path)
    return path
