"""The bounds that the puzzles and the two-agent code/math environments declare
(``reward_bounds``), against hand-computed values and their pages' numbers."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

import llm_envs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "envs"


def bounds(env_id, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = llm_envs.make(env_id, **options)
        env.reset(seed=0)
    return {agent: env.reward_bounds(agent) for agent in env.possible_agents}


def test_sokoban_declares_the_potential_bound_and_none_for_the_shuttle_weights():
    # r ≤ 1·n + 0.1·n·(6 + 6) + 10 = 12.2 (one box); plan and tool (1 + α)·12.2 = 24.4.
    assert bounds("llm/Sokoban-v0") == {"tool": (-math.inf, pytest.approx(24.4)), "plan": (-math.inf, pytest.approx(24.4))}
    # Two boxes: 2 + 0.1·2·12 + 10 = 14.4, doubled.
    assert bounds("llm/Sokoban-v0", num_boxes=2)["plan"][1] == pytest.approx(28.8)
    # The paper's −0.5 off a target: a shuttle farms it, no upper bound.
    paper = bounds("llm/Sokoban-v0", reward_shaping="paper", allow_reward_holes=True)
    assert paper["tool"][1] == math.inf and paper["plan"][1] == math.inf
    assert bounds("llm/Sokoban-v0", reward_mode="outcome")["tool"] == (0.0, 2.0)
    assert "(−∞, 24.4]" in (DOCS / "sokoban.md").read_text(encoding="utf-8")


def test_sudoku_declares_the_change_of_its_potential():
    # r ∈ [−0.01 − 1, −0.01 + 2.5 + 0.5] = [−1.01, 2.99]. progress_reference="previous": the
    # plan agent −1 or 2·r; the tool −1 or a credit in [0, 2.99], plus r.
    previous = bounds("llm/Sudoku-v0", progress_reference="previous")
    assert previous["plan"] == (pytest.approx(-2.02), pytest.approx(5.98))
    assert previous["tool"] == (pytest.approx(-2.01), pytest.approx(5.98))
    # "best" (default): r less the shortfall below the best potential, at most the spread of an
    # unsolved board's potential, 0.5 + 0.5 = 1: q ∈ [−2.01, 2.99]; plan [−4.02, 5.98], tool
    # −1 or [0, 2.99], plus q: [−3.01, 5.98].
    declared = bounds("llm/Sudoku-v0")
    assert declared["plan"] == (pytest.approx(-4.02), pytest.approx(5.98))
    assert declared["tool"] == (pytest.approx(-3.01), pytest.approx(5.98))
    # The paper's absolute share: r ≤ −0.01 + 0.5 + 2 = 2.49.
    assert bounds("llm/Sudoku-v0", reward_shaping="paper", allow_reward_holes=True)["plan"][1] == pytest.approx(4.98)
    text = (DOCS / "sudoku.md").read_text(encoding="utf-8")
    assert "[−4.02, 5.98]" in text and "[−3.01, 5.98]" in text


def test_plan_path_declares_its_static_bound():
    # r ≤ 1·10·10 + 1 + 0.5 = 101.5, doubled.
    assert bounds("llm/PlanPath-v0")["plan"] == (-math.inf, pytest.approx(203.0))
    assert "(−∞, 203]" in (DOCS / "plan_path.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("env_id, page", [("llm/CoderTester-v0", "coder_tester.md"), ("llm/ReasonerTool-v0", "reasoner_tool.md")])
def test_change_rewards_can_be_negative_and_the_paper_turn_reward_cannot(env_id, page):
    # Levels in [0, alpha + 1] = [0, 2]: paid their change, [−2, 2]; their level, [0, 2].
    assert set(bounds(env_id).values()) == {(-2.0, 2.0)}
    assert set(bounds(env_id, turn_rewards="paper", allow_reward_holes=True).values()) == {(0.0, 2.0)}
    assert set(bounds(env_id, reward_mode="outcome").values()) == {(-1.0, 1.0)}
    assert "defaults [−2, 2]" in (DOCS / page).read_text(encoding="utf-8")
