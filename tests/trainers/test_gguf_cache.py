"""The converted-GGUF cache (llm_trainers.policies): keyed by the file's content, so two
checkouts holding the same file share one copy, and the copy's config names its architecture,
so that ``transformers serve`` and TRL can load it (a GGUF load leaves ``architectures`` unset).

The real conversion of SmolLM2 takes minutes (tests/trainers/test_real_model.py, slow); here a
tiny model stands in for the dequantised one and any bytes for the GGUF file.
"""

from __future__ import annotations

import json
import shutil

from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from llm_trainers import policies


def _fake_gguf(directory, content=b"GGUF fake model bytes"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.Q4_1.gguf").write_bytes(content)
    return str(directory), {"gguf_file": "model.Q4_1.gguf"}


def test_the_cache_is_keyed_by_content_not_by_path(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_CACHE", str(tmp_path / "cache"))
    first = policies.gguf_cache_dir(*_fake_gguf(tmp_path / "checkout_a"))
    second = policies.gguf_cache_dir(*_fake_gguf(tmp_path / "checkout_b"))
    other = policies.gguf_cache_dir(*_fake_gguf(tmp_path / "checkout_c", b"another model"))
    assert first == second  # the same file in another checkout: the same copy
    assert other != first
    assert first.parent == tmp_path / "cache" / "gguf"


def test_the_converted_copy_names_its_architecture_and_loads_by_plain_path(tmp_path, monkeypatch, tiny_model_dir):
    monkeypatch.setenv("LLM_ENVS_CACHE", str(tmp_path / "cache"))
    where, extra = _fake_gguf(tmp_path / "checkout")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.config.architectures = None  # as after a GGUF load
    policies._store_converted(where, extra, model, AutoTokenizer.from_pretrained(tiny_model_dir))
    cache = policies.gguf_cache_dir(where, extra)
    assert (cache / "complete").is_file()
    config = json.loads((cache / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert AutoConfig.from_pretrained(cache).architectures == ["LlamaForCausalLM"]
    # plain_model_dir hands the converted directory to tools that cannot read GGUF (no hub).
    gguf_path = f"{where}/{extra['gguf_file']}"
    assert policies.plain_model_dir(gguf_path) == str(cache)
    assert policies.plain_model_dir(tiny_model_dir) == tiny_model_dir
    # Another checkout's copy of the same file finds the same converted model.
    shutil.copytree(tmp_path / "checkout", tmp_path / "elsewhere")
    assert policies.plain_model_dir(str(tmp_path / "elsewhere" / extra["gguf_file"])) == str(cache)
