"""Reference agents reproduce known values: Kuhn Poker's Nash value −1/18, minimax Tic-Tac-Toe
always drawn, solvers far stronger than random play."""

from __future__ import annotations

import math

import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel", reason="open_spiel is not installed (pip install 'llm-envs[games]')")

from llm_envs.agents import RandomAgent, ReferenceAgent  # noqa: E402
from llm_envs.envs.openspiel.solvers import cfr_policy_table  # noqa: E402
from llm_envs.runner import run_episodes  # noqa: E402

KUHN_VALUE = -1.0 / 18.0


def tabular(game, table):
    from open_spiel.python import policy as policy_lib

    pol = policy_lib.TabularPolicy(game)
    for key, index in pol.state_lookup.items():
        pol.action_probability_array[index] = 0.0
        for action, prob in table[key].items():
            pol.action_probability_array[index, action] = prob
    return pol


@pytest.mark.parametrize("game, iterations, bound", [("kuhn_poker", 2000, 0.005), ("leduc_poker", 300, 0.02)])
def test_cfr_reference_is_close_to_a_nash_equilibrium(game, iterations, bound):
    from open_spiel.python.algorithms import exploitability

    table = cfr_policy_table(game + "()", iterations)
    loaded = pyspiel.load_game(game)
    assert exploitability.nash_conv(loaded, tabular(loaded, table)) < bound


def test_kuhn_nash_value_is_minus_one_eighteenth():
    from open_spiel.python.algorithms import expected_game_score

    game = pyspiel.load_game("kuhn_poker")
    pol = tabular(game, cfr_policy_table("kuhn_poker()", 2000))
    exact = expected_game_score.policy_value(game.new_initial_state(), [pol, pol])[0]
    assert exact == pytest.approx(KUHN_VALUE, abs=2e-3)

    # The same through the text environment and the runner: Nash vs Nash, hand after hand.
    hands = 3000
    results = run_episodes("llm/KuhnPoker-v0", ReferenceAgent(), hands, seed=0, concurrency=16)
    returns = np.array([r.rewards["player_0"] for r in results])
    half_width = 1.96 * returns.std(ddof=1) / math.sqrt(hands)
    assert abs(returns.mean() - KUHN_VALUE) <= half_width, (returns.mean(), half_width)
    assert all(r.metrics["success"] == 1.0 for r in results)


def test_minimax_tic_tac_toe_always_draws():
    results = run_episodes("llm/TicTacToe-v0", ReferenceAgent(), 24, seed=0, concurrency=8)
    assert all(r.rewards == {"player_0": 0.0, "player_1": 0.0} for r in results)
    assert all(r.metrics["moves"] == 9.0 for r in results)
    openings = {r.records[0]["action"] for r in results}
    assert len(openings) > 1  # ties between optimal moves are broken at random: games vary


@pytest.mark.parametrize("env_id, games", [("llm/TicTacToe-v0", 10), ("llm/ConnectFour-v0", 4)])
def test_reference_beats_random_from_both_seats(env_id, games):
    reference, rand = ReferenceAgent(), RandomAgent(0, per_decision_seed=True)
    as_first = run_episodes(env_id, {"player_0": reference, "player_1": rand}, games, seed=0)
    as_second = run_episodes(env_id, {"player_0": rand, "player_1": reference}, games, seed=0)
    assert all(r.rewards["player_0"] >= 0 for r in as_first)  # never loses
    assert all(r.rewards["player_1"] >= 0 for r in as_second)
    assert sum(r.rewards["player_0"] for r in as_first) > games / 2
