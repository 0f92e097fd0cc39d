"""Train, validation and test puzzles never overlap (content-hash splits), for every game."""

from __future__ import annotations

import numpy as np
import pytest

from llm_envs.core.splits import SPLITS, split_of
from llm_envs.envs.plan_path.rules import PlanPathRules
from llm_envs.envs.sokoban.rules import SokobanRules
from llm_envs.envs.sudoku.rules import SudokuRules

# A 3x4 empty grid has only 132 Plan-Path puzzles (ordered start/goal pairs), 36 up to its
# mirror images (27 train, 4 validation, 5 test): with seed ranges as splits, the same puzzle
# would certainly turn up in two splits.
GAMES = {
    "sudoku": SudokuRules(),
    "sudoku_9x9": SudokuRules(size=9),
    "plan_path": PlanPathRules(),
    "plan_path_tiny": PlanPathRules(rows=3, cols=4, obstacle_density=0.0),
    "sokoban": SokobanRules(),
}


@pytest.mark.parametrize("game", sorted(GAMES))
def test_splits_are_disjoint_even_with_shared_seeds(game):
    rules = GAMES[game]
    texts: dict[str, set[str]] = {}
    for split in SPLITS:
        texts[split] = set()
        for seed in range(20 if game == "sudoku_9x9" else 60):  # the same seeds for every split
            state = rules.generate(np.random.default_rng(seed), split)
            key = rules.split_key(state)  # the canonical form: the same for every variant
            assert split_of(key) == split
            texts[split].add(key)
    assert not texts["train"] & texts["validation"]
    assert not texts["train"] & texts["test"]
    assert not texts["validation"] & texts["test"]
    # The tiny space really repeats puzzles, so the test has teeth there.
    if game == "plan_path_tiny":
        assert len(texts["train"]) <= 27
        assert (len(texts["validation"]), len(texts["test"])) == (4, 5)  # 60 seeds find them all
