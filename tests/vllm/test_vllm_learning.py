"""The signalling learning test with vLLM rollouts: the tiny random-weight model of
``tests/trainers/test_learning_e2e.py`` (``at_grpo_L1``: AT-GRPO, L1 full fine-tuning, 40 steps,
32 environments, tree K 4) learns the game when vLLM (the CPU build) generates every rollout and
every evaluation, with the weights pushed to vLLM after each update. Same thresholds as the HF
engine's test: success below 0.15 before, at least 0.35 and 0.25 above the start after.
"""

from __future__ import annotations

import pytest

from tests.vllm.conftest import NO_VLLM

pytest.importorskip("vllm", reason=NO_VLLM)

from llm_trainers import make_trainer  # noqa: E402
from llm_trainers.config import load_config  # noqa: E402
from tests.trainers.test_learning_e2e import CASES, COMMON  # noqa: E402


def test_tiny_model_learns_signalling_with_vllm_rollouts(tmp_path):
    overrides = [*COMMON, *CASES["at_grpo_L1"], f"run.output_dir={tmp_path / 'run'}", "run.seed=0", "run.threads=1",
                 "rollout.engine=vllm", f"rollout.vllm={{adapter_dir: {tmp_path / 'adapters'}, max_model_len: 512}}"]
    trainer = make_trainer(load_config(None, overrides))
    start = trainer.evaluate()
    final = trainer.train()
    pushes = [r for r in trainer.engine.served.values()]
    trainer.close()
    s0, s1 = start["eval/success"], final["eval/success"]
    r0 = start["eval/reward/speaker"] + start["eval/reward/listener"]
    r1 = final["eval/reward/speaker"] + final["eval/reward/listener"]
    print(f"vLLM rollouts: success {s0:.3f} -> {s1:.3f}; team+local reward {r0:.3f} -> {r1:.3f}")
    assert pushes and all(p.adapter is None for p in pushes)  # L1 full fine-tuning: full-weight pushes
    assert s0 < 0.15, "the untrained model should rarely succeed"
    assert s1 >= 0.35 and s1 >= s0 + 0.25, f"success {s0:.3f} -> {s1:.3f}"
    assert r1 >= r0 + 0.5, f"reward {r0:.3f} -> {r1:.3f}"
