"""The OpenSpiel adapter: invalid moves, delayed credit, chance, simultaneous cycles, hooks, and a
sweep over every OpenSpiel game that loads with its default parameters."""

from __future__ import annotations

import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel", reason="open_spiel is not installed (pip install 'llm-envs[games]')")

import llm_envs  # noqa: E402
from llm_envs.interop import SimultaneousParallelEnv, parallel_env  # noqa: E402
from tests.envs.helpers import play  # noqa: E402


def returns_of(env):
    return [env.agent_rewards()[a] for a in env.possible_agents]


def test_a_reply_that_names_no_legal_move_forfeits():
    env = llm_envs.make("llm/TicTacToe-v0")
    env.reset(seed=0)
    env.step("x(1,1)")
    env.step("I would rather not play")  # player_1 forfeits
    assert env.episode_over and returns_of(env) == [1.0, -1.0]
    last = env.records[-1]
    assert not last.format_ok and last.parsed["forfeit"] and last.info["error"]
    metrics = env.episode_metrics()
    assert metrics["forfeit"] == 1.0 and metrics["success"] == 0.0 and metrics["invalid_moves"] == 1.0
    assert "forfeit by player_1" in env.observe("player_0")["prompt"]


def test_a_forfeit_cannot_lift_a_partner_in_a_game_of_more_sides():
    # 3-player Kuhn, seed 0 (cards 2, 0, 1): player_0 bets, player_1 calls, and player_2 has
    # lost anyway. A forfeit gave the others an equal share of its loss (player_1 -2 -> +1); an
    # invalid reply is a random legal move there instead, and "forfeit" is refused.
    with pytest.raises(ValueError, match="lift another's result"):
        llm_envs.openspiel("kuhn_poker(players=3)", invalid_move="forfeit")
    env = llm_envs.openspiel("kuhn_poker(players=3)")
    env.reset(seed=0)
    env.step("Bet")
    env.step("Bet")
    env.step("I forfeit")
    assert env.records[-1].parsed.get("forfeit") is None and "played" in env.records[-1].parsed
    assert env.episode_over and env.agent_rewards()["player_1"] == -2.0
    # Two players, or one shared utility: a forfeit still ends the game, its side losing.
    assert llm_envs.openspiel("kuhn_poker")._invalid_move == "forfeit"


def test_a_forfeit_before_the_opponent_moved_leaves_a_passive_record():
    env = llm_envs.make("llm/KuhnPoker-v0")
    totals = play(env, {"player_0": lambda e, a: "fold!", "player_1": lambda e, a: "Bet"}, seed=3)
    assert returns_of(env) == [-2.0, 2.0] == [totals["player_0"], totals["player_1"]]
    passive = [r for r in env.records if r.info.get("passive")]
    assert [r.agent for r in passive] == ["player_1"] and passive[0].action == "" and passive[0].reward == 2.0


def test_random_policy_plays_a_legal_move_and_charges_the_format_penalty():
    env = llm_envs.make("llm/TicTacToe-v0", invalid_move="random", format_penalty=-0.5)
    env.reset(seed=0)
    env.step("nonsense")
    record = env.records[0]
    assert not record.format_ok and record.reward == -0.5
    assert record.parsed["played"] in [f"x({r},{c})" for r in range(3) for c in range(3)]
    assert env.agent_selection == "player_1" and not env.episode_over
    assert env.spiel_state.move_number() == 1


def test_terminal_returns_land_on_the_last_move_of_every_player():
    env = llm_envs.make("llm/TicTacToe-v0")
    moves = iter(["x(0,0)", "o(1,0)", "x(0,1)", "o(1,1)", "x(0,2)"])
    play(env, lambda e, a: next(moves), seed=0)
    rewards = [(r.agent, r.reward) for r in env.records]
    assert rewards == [("player_0", 0.0), ("player_1", 0.0), ("player_0", 0.0), ("player_1", -1.0), ("player_0", 1.0)]
    assert env.records[-1].reward_components == {"game": 1.0}


def test_chance_comes_from_the_seed():
    def deal(seed):
        env = llm_envs.make("llm/KuhnPoker-v0")
        env.reset(seed=seed)
        return env.spiel_state.history()[:2]

    assert deal(5) == deal(5)
    assert len({tuple(deal(seed)) for seed in range(12)}) > 2


def test_players_see_their_own_card_only():
    env = llm_envs.make("llm/LeducPoker-v0")
    env.reset(seed=4)
    cards = env.spiel_state.history()[:2]
    for player, card in enumerate(cards):
        prompt = env.observe(f"player_{player}")["prompt"]
        assert f"Your private card: {'JQK'[card // 2]}." in prompt
        assert "Public card: not dealt yet" in prompt
    kuhn = llm_envs.make("llm/KuhnPoker-v0")
    kuhn.reset(seed=2)
    c0, c1 = kuhn.spiel_state.history()[:2]
    assert f"Your card: {'JQK'[c0]}" in kuhn.observe("player_0")["prompt"]
    assert f"Your card: {'JQK'[c1]}" in kuhn.observe("player_1")["prompt"]
    assert f"Your card: {'JQK'[c0]}" not in kuhn.observe("player_1")["prompt"]


def test_sampled_chance_is_seeded_and_clones_keep_their_own_generator():
    def pool(seed):
        env = llm_envs.make("llm/Negotiation-v0")
        env.reset(seed=seed)
        return env.observe("player_0")["prompt"]

    assert pool(1) == pool(1)
    assert len({pool(seed) for seed in range(8)}) > 1

    # A game whose generator draws during play: clones must not share it.
    env = llm_envs.openspiel("stones_and_gems")
    env.reset(seed=0)
    twin = env.clone()
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    for _ in range(15):
        if twin.episode_over:
            break
        twin.step(twin.random_action(twin.agent_selection, rng_a))
    for _ in range(15):
        if env.episode_over:
            break
        env.step(env.random_action(env.agent_selection, rng_b))
    assert env.transcript() == twin.transcript()


def test_simultaneous_games_play_in_cycles_and_have_a_parallel_form():
    env = llm_envs.openspiel("goofspiel(num_cards=4)")
    assert env.metadata["is_parallelizable"] is True
    assert llm_envs.make("llm/KuhnPoker-v0").metadata["is_parallelizable"] is False
    env.reset(seed=0)
    before = env.observe("player_1")
    env.step(env.legal_actions("player_0")[0])
    assert env.observe("player_1") == before  # nobody sees a same-cycle move
    assert env.agent_selection == "player_1" and env.spiel_state.move_number() == 0
    bid = env.records[-1].action
    assert bid not in env.transcript() and "shown once every player has chosen" in env.transcript()
    env.step(env.legal_actions("player_1")[0])
    assert bid in env.transcript()  # (the render too: it is the transcript)
    par = SimultaneousParallelEnv(llm_envs.openspiel("goofspiel(num_cards=4)"))
    par.reset(seed=1)
    rng = np.random.default_rng(0)
    totals = {a: 0.0 for a in par.possible_agents}
    while par.agents:
        actions = {a: par.unwrapped.random_action(a, rng) for a in par.agents}
        _, rewards, _, _, _ = par.step(actions)
        for agent, reward in rewards.items():
            totals[agent] += reward
    assert totals == pytest.approx(par.unwrapped.agent_rewards())
    assert par.unwrapped.episode_metrics()["success"] == 1.0
    assert isinstance(parallel_env(llm_envs.openspiel("matrix_rps")), SimultaneousParallelEnv)


def test_numeric_hooks_agree_with_the_text():
    env = llm_envs.make("llm/TicTacToe-v0")
    catalog = env.action_catalog()
    assert catalog == [f"x({r},{c})" for r in range(3) for c in range(3)] and env.max_legal_actions == 9
    env.reset(seed=0)
    env.step("x(1,1)")
    mask = env.action_mask("player_1")
    assert mask.dtype == np.int8 and mask.tolist() == [1, 1, 1, 1, 0, 1, 1, 1, 1]
    assert env.action_mask("player_0").sum() == 0 and env.legal_actions("player_0") == []
    assert env.legal_actions("player_1")[0] == "o(0,0)"
    env.step(catalog[8])  # a catalog name plays its action for whoever moves
    assert env.records[-1].parsed["move"] == "o(2,2)"
    space = env.state_space()
    assert space is env.state_space()
    tensor = env.state_tensor("player_0")
    assert tensor.dtype == np.float32 and tensor.shape == space.shape and space.contains(tensor)

    kuhn = llm_envs.make("llm/KuhnPoker-v0")
    kuhn.reset(seed=0)
    a, b = kuhn.state_tensor("player_0"), kuhn.state_tensor("player_1")
    assert a.shape == kuhn.state_space().shape and not np.array_equal(a, b)  # private cards differ


def test_reference_and_random_policies_are_distributions_over_legal_moves():
    env = llm_envs.make("llm/KuhnPoker-v0")
    env.reset(seed=0)
    for policy in (env.reference_policy("player_0"), env.random_policy("player_0")):
        assert set(policy) <= set(env.legal_actions("player_0")) and sum(policy.values()) == pytest.approx(1.0)
    assert env.reference_policy("player_1") == {}


def test_unknown_games_and_options_are_clear_errors():
    with pytest.raises(ValueError, match="cannot load OpenSpiel game"):
        llm_envs.openspiel("no_such_game")
    with pytest.raises(ValueError, match="mean-field"):
        llm_envs.openspiel("mfg_crowd_modelling")
    with pytest.raises(ValueError, match="invalid_move"):
        llm_envs.openspiel("tic_tac_toe", invalid_move="retry")
    with pytest.raises(TypeError, match="unknown option"):
        llm_envs.openspiel("tic_tac_toe", colour="red")


def _default_loadable_games():
    return sorted(
        g.short_name for g in pyspiel.registered_games() if g.default_loadable and not g.short_name.startswith("mfg_")
    )


#: Games whose own scoring is slow by design get fewer moves: bridge_uncontested_bidding scores a
#: contract with 10 double-dummy redeals (~16 s), bridge solves every deal double-dummy.
MAX_MOVES = {"bridge_uncontested_bidding": 1, "bridge": 6}
#: Games that load but cannot be played through integer actions (a clear error instead).
UNSUPPORTED = {"crossword": "uses OpenSpiel's action structs only"}


@pytest.mark.parametrize("game", _default_loadable_games())
def test_random_play_never_raises_on_any_openspiel_game(game):
    """Every game that loads with its defaults plays (truncated at 40 moves) with random legal
    moves, a garbage reply, and the delayed-credit bookkeeping intact."""
    if game in UNSUPPORTED:
        with pytest.raises(ValueError, match="not supported"):
            llm_envs.openspiel(game)
        return
    for seed, policy in ((0, "auto"), (1, "random")):
        env = llm_envs.openspiel(game, max_moves=MAX_MOVES.get(game, 40), invalid_move=policy)
        rng = np.random.default_rng(seed)
        env.reset(seed=seed)
        totals = {a: 0.0 for a in env.possible_agents}
        for agent in env.agent_iter(max_iter=2000):
            obs, reward, terminated, truncated, _ = env.last()
            totals[agent] += reward
            assert isinstance(obs["prompt"], str) and obs["prompt"]
            if terminated or truncated:
                env.step(None)
                continue
            garbage = len(env.records) == 3
            env.step("\x00 no move here" if garbage else env.random_action(agent, rng))
        assert totals == pytest.approx(env.agent_rewards(), abs=1e-9)
        assert all(r.final for r in env.records)
        assert env.state_tensor(env.possible_agents[0]).shape == env.state_space().shape
