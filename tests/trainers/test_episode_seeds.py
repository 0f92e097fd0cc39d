"""Training and evaluation episodes never share a seed, whatever the run seed, step or batch."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from llm_trainers.config import load_config
from llm_trainers.trainer import EVAL_SEED_BASE, TRAIN_SEED_BASE, Trainer

RUN_SEEDS = [*range(0, 21), 99, 1_000, 123_456_789, 2**40, 2**63 - 1]


_CONFIG = load_config("signalling_at_grpo_l1")


def _seeds(run_seed: int, step: int, num_envs: int, samples_per_problem: int) -> list[int]:
    cfg = copy.deepcopy(_CONFIG)
    cfg.run.seed, cfg.env.num_envs, cfg.env.samples_per_problem = run_seed, num_envs, samples_per_problem
    # The method only reads the config: no models are built.
    return Trainer.train_seeds(SimpleNamespace(cfg=cfg), step)


@pytest.mark.parametrize(("num_envs", "samples_per_problem"), [(1, 1), (16, 1), (64, 4), (128, 1)])
def test_training_seeds_never_reach_the_evaluation_seeds(num_envs, samples_per_problem):
    """Evaluation plays seeds ``EVAL_SEED_BASE + i``; with the former ``seed·10⁸ + step·problems
    + i`` scheme (evaluation at 10⁹ + i), ``run.seed=10`` trained on all of them in steps 0–1."""
    assert EVAL_SEED_BASE + 10**12 < TRAIN_SEED_BASE  # room for any evaluation size
    evaluation = range(EVAL_SEED_BASE, EVAL_SEED_BASE + 100_000)
    for run_seed in RUN_SEEDS:
        seen: set[int] = set()
        for step in range(0, 200, 13) if num_envs > 16 else range(60):
            seeds = _seeds(run_seed, step, num_envs, samples_per_problem)
            assert len(seeds) == num_envs
            assert all(TRAIN_SEED_BASE <= s < 2**63 for s in seeds), (run_seed, step)
            assert not any(s in evaluation for s in seeds)
            # Instance i plays problem i // samples_per_problem; distinct problems, distinct seeds.
            problems = seeds[::samples_per_problem]
            assert seeds == [problems[i // samples_per_problem] for i in range(num_envs)]
            assert len(set(problems)) == len(problems)
            assert not seen & set(problems), "a problem seed came back in a later step"
            seen |= set(problems)


def test_training_seeds_are_a_pure_function_of_seed_step_and_instance():
    assert _seeds(3, 5, 16, 1) == _seeds(3, 5, 16, 1)  # a resumed run replays the same episodes
    assert _seeds(3, 5, 16, 1) != _seeds(4, 5, 16, 1)
    assert _seeds(3, 5, 16, 1) != _seeds(3, 6, 16, 1)
