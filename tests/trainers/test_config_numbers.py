"""Numbers out of range in a training config are refused at load, with their field: a NaN
learning rate or KL coefficient, a negative temperature or a top_p of 2 were accepted."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from llm_trainers.config import load_config


@pytest.mark.parametrize(("override", "says"), [
    ("train.lr=nan", "train.lr must be a finite number > 0, got nan"),
    ("train.lr=-1", "train.lr must be a finite number > 0"),
    ("algorithm.kl_coef=nan", "algorithm.kl_coef must be a finite number >= 0"),
    ("algorithm.gamma=1.5", "algorithm.gamma must be in [0, 1]"),
    ("algorithm.reward_clip=-1", "algorithm.reward_clip must be a finite number > 0 (or null)"),
    ("rollout.temperature=-1", "rollout.temperature must be a finite number >= 0"),
    ("rollout.top_p=2", "rollout.top_p must be in (0, 1]"),
    ("train.max_grad_norm=inf", "train.max_grad_norm must be a finite number > 0 (or null: no clipping)"),
    ("train.epochs=0", "train.epochs must be >= 1"),
    ("sft.lr=nan", "sft.lr must be a finite number > 0"),
    ("rollout.async.is_cap=nan", "rollout.async.is_cap is NaN"),
])
def test_a_number_out_of_range_is_refused_with_its_field(override, says):
    with pytest.raises(ValueError, match="invalid config") as caught:
        load_config("signalling_at_grpo_l1", [override])
    assert says in str(caught.value)


def test_every_shipped_config_passes_the_numeric_rules():
    configs = sorted(Path(p).stem for p in glob.glob(str(Path(__file__).resolve().parents[2] / "llm_trainers/configs/*.yaml")))
    assert len(configs) > 30
    for name in configs:
        load_config(name, [])
    assert load_config("signalling_at_grpo_l1", ["train.max_grad_norm=null", "rollout.eval_temperature=0.7"])
