"""The trainers on a CUDA GPU: sampling, scoring, a training step, checkpoints, in bf16.

Every test here needs a CUDA device and is skipped without one (CI has none: these ran on a lent
GPU, docs/benchmarks.md "The GPU path"). The learning test on CUDA is
tests/trainers/test_learning_e2e.py's ``-cuda`` cases.
"""

from __future__ import annotations

import pytest
import torch

from llm_trainers.agents.hf import HFEngine, SamplingParams
from llm_trainers.batching import completion_logprobs, pack_sequences
from llm_trainers.checkpoint import latest_checkpoint
from llm_trainers.config import load_config
from llm_trainers.policies import build_policies
from llm_trainers.trainer import Trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

OBS = [
    {"instruction": "You are the speaker. Symbols: red green blue yellow.", "prompt": "Round 1 of 2. Target: blue"},
    {"instruction": "", "prompt": "Message: red"},
    {"instruction": "You are the listener.", "prompt": "Round 2 of 2. Message: green green"},
]

STEP = [
    "model.path=tiny:llm/Signalling-v0",
    "model.device=cuda",
    "model.dtype=bfloat16",
    "train.bf16=true",
    "model.gradient_checkpointing=true",
    "rollout.max_new_tokens=4",
    "rollout.k=4",
    "env.num_envs=8",
    "run.steps=2",
    "run.eval_every=-1",
    "run.eval_at_start=false",
    "run.save_every=1",
    "run.progress=false",
    "run.tensorboard=false",
    "run.export_final=false",
    "train.lr=1e-2",
    "train.micro_batch_size=8",
    # An entropy term: every record trains even where a random model's groups are all equal.
    "train.entropy_coef=0.01",
]
LEVELS = {
    "L1": ["model.level=L1"],
    "L2": ["model.level=L2", "model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj, lm_head]}"],
}


def _params(trainer):
    return {f"{p.name}/{k}": v.detach().float().cpu() for p in trainer.policies
            for k, v in p.trainable_state_dict().items()}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sampled_logprobs_match_the_learner_on_cuda(tiny_model_dir, dtype):
    """The engine's log-probs of what it sampled equal a separate scoring pass (the importance
    ratio's denominator), on the GPU; bf16 within bf16's rounding."""
    policies = build_policies("L1", ["speaker", "listener"], tiny_model_dir, device="cuda", dtype=dtype)
    engine = HFEngine(policies, SamplingParams(temperature=1.0, max_new_tokens=6), seed=3)
    prompts = [engine.encode("shared", o) for o in OBS]
    flat = [g for row in engine.generate("shared", prompts, n=4) for g in row]
    flat_prompts = [p for p in prompts for _ in range(4)]
    batch = pack_sequences(flat_prompts, [g.token_ids for g in flat], policies["shared"].tokenizer.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(policies["shared"].model, batch.to("cuda"), temperature=1.0)
    diffs = torch.cat([(torch.tensor(g.logprobs) - lp[i, : len(g.token_ids)].float().cpu()).abs()
                       for i, g in enumerate(flat)])
    assert all(len(g.token_ids) > 0 for g in flat)
    print(f"{dtype}: max |engine - learner| log-prob {diffs.max():.2e}, mean {diffs.mean():.2e}")
    if dtype == "float32":
        assert diffs.max() < 2e-3
    else:  # bf16 keeps 8 bits of mantissa; a misaligned or wrong log-prob is off by far more
        assert diffs.mean() < 0.05 and diffs.max() < 0.5


@pytest.mark.parametrize("level", list(LEVELS))
def test_a_bf16_step_with_gradient_checkpointing_trains_on_cuda_and_resumes_on_the_cpu(tmp_path, level):
    trainer = Trainer(load_config(None, [*STEP, *LEVELS[level], f"run.output_dir={tmp_path}"]))
    pol = next(iter(trainer.policies))
    assert pol.device.type == "cuda"
    before = _params(trainer)
    trainer.train()
    after = _params(trainer)
    trainer.close()
    assert after.keys() == before.keys()
    assert any(not torch.equal(before[k], after[k]) for k in after), "the step changed nothing"
    assert all(torch.isfinite(v).all() for v in after.values())
    assert latest_checkpoint(tmp_path / "checkpoints").name == "step_00000002"

    # The checkpoint written on the GPU loads on a machine without one.
    cpu = [o.replace("model.device=cuda", "model.device=cpu") for o in STEP]
    resumed = Trainer(load_config(None, [*cpu, *LEVELS[level], f"run.output_dir={tmp_path}", "run.steps=3"]),
                      resume=True)
    assert resumed.step == 2 and next(iter(resumed.policies)).device.type == "cpu"
    restored = _params(resumed)
    for k in after:
        assert torch.equal(restored[k], after[k]), k
    resumed.train()
    resumed.close()
