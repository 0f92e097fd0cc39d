"""``llm-envs arena``: ratings rank solvers above random play, the run directory contract, resume,
Swiss pairings, and the rating arithmetic."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspiel", reason="open_spiel is not installed (pip install 'llm-envs[games]')")
pytest.importorskip("openskill", reason="openskill is not installed (pip install 'llm-envs[games]')")

from llm_envs.agents import RandomAgent, ReferenceAgent  # noqa: E402
from llm_envs.agents.base import Agent  # noqa: E402
from llm_envs.cli import main  # noqa: E402
from llm_envs.episodes import RunnerError  # noqa: E402
from llm_envs.games.arena import run_arena, swiss_pairings  # noqa: E402
from llm_envs.games.ratings import Contest, rank_by_score, rate_contests  # noqa: E402

SUMMARY_KEYS = {"kind", "format_version", "env_id", "agents", "ratings", "head_to_head", "settings"}
RATING_KEYS = {"agent", "mu", "sigma", "rating", "ci_low", "ci_high", "games", "wins", "draws", "losses", "score"}
PAIR_KEYS = {"wins", "draws", "losses", "games", "score"}
GAME_KEYS = {"game_index", "seed", "seats", "winner", "returns", "episode"}

# (seeds per match, rounds, environment options): a match sums returns over its games, so chip
# games need enough hands per match for the equilibrium player to come out ahead every time.
CURATED = {
    "llm/TicTacToe-v0": (1, 16, {}),
    "llm/ConnectFour-v0": (1, 16, {"reference_options": {"simulations": 100}}),
    "llm/Negotiation-v0": (2, 16, {"reference_options": {"simulations": 100}}),
    "llm/KuhnPoker-v0": (60, 18, {}),
    "llm/LeducPoker-v0": (30, 18, {}),
}
SLOW = {"llm/KuhnPoker-v0", "llm/LeducPoker-v0"}


def players():
    return {"reference": ReferenceAgent(), "random": RandomAgent(0, per_decision_seed=True)}


@pytest.mark.parametrize(
    "env_id", [pytest.param(e, marks=pytest.mark.slow) if e in SLOW else e for e in CURATED]
)
def test_reference_outranks_random_with_separated_intervals(env_id, tmp_path):
    games, rounds, kwargs = CURATED[env_id]
    summary = run_arena(env_id, players(), out_dir=tmp_path, rounds=rounds, games=games, env_kwargs=kwargs,
                        progress=False, plot=False)
    top, bottom = summary["ratings"]
    assert (top["agent"], bottom["agent"]) == ("reference", "random")
    assert top["ci_low"] > bottom["ci_high"], summary["ratings"]
    assert top["mean_return"] > bottom["mean_return"]


def test_run_directory_contract(tmp_path):
    summary = run_arena("llm/TicTacToe-v0", players(), out_dir=tmp_path, rounds=2, games=2, specs={
        "reference": "reference", "random": "random"}, progress=False, plot=False)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert SUMMARY_KEYS <= set(on_disk) and on_disk["kind"] == "arena" and on_disk["format_version"] == 1
    assert on_disk["env_id"] == "llm/TicTacToe-v0" and on_disk["agents"] == {"reference": "reference", "random": "random"}
    for row in on_disk["ratings"]:
        assert RATING_KEYS <= set(row)
        assert row["wins"] + row["draws"] + row["losses"] == row["games"] == 2
        assert row["ci_low"] < row["mu"] < row["ci_high"] and row["rating"] == pytest.approx(row["mu"] - 3 * row["sigma"])
    h2h = on_disk["head_to_head"]
    assert PAIR_KEYS <= set(h2h["reference"]["random"])
    assert h2h["reference"]["random"]["wins"] == h2h["random"]["reference"]["losses"]
    lines = [json.loads(x) for x in (tmp_path / "games.jsonl").read_text().splitlines()]
    assert [x["game_index"] for x in lines] == list(range(8))  # 2 rounds x 2 seeds x 2 seat orders
    for line in lines:
        assert GAME_KEYS <= set(line)
        seats = line["seats"]
        assert sorted(seats.values()) == ["player_0", "player_1"]
        assert line["returns"] == {name: line["episode"]["rewards"][seat] for name, seat in seats.items()}
        best = max(line["returns"].values())
        leaders = [n for n, r in line["returns"].items() if r == best]
        assert line["winner"] == (leaders[0] if len(leaders) == 1 else None)
    # duplicate play: each seed is played once from each seat, the same seed in every match of a round
    by_seed = {}
    for line in lines:
        by_seed.setdefault(line["seed"], set()).add(line["seats"]["reference"])
    assert by_seed == {0: {"player_0", "player_1"}, 1: {"player_0", "player_1"},
                       2: {"player_0", "player_1"}, 3: {"player_0", "player_1"}}


class Flaky(Agent):
    """Plays like ``inner`` but dies after ``limit`` calls (an interrupted run)."""

    def __init__(self, inner: Agent, limit: int) -> None:
        self.inner, self.limit, self.calls = inner, limit, 0
        self.name = inner.name

    def act_batch(self, requests):
        self.calls += 1
        if self.calls > self.limit:
            raise KeyboardInterrupt("simulated interruption")
        return self.inner.act_batch(requests)

    def settings(self):
        return self.inner.settings()  # (it plays as ``inner`` does)


def outcomes(path):
    lines = [json.loads(x) for x in (path / "games.jsonl").read_text().splitlines()]
    for line in lines:
        line["episode"].pop("duration_s")
    return lines


def test_an_interrupted_tournament_resumes_to_the_same_result(tmp_path):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    kwargs = dict(rounds=2, games=3, progress=False, plot=False)
    expected = run_arena("llm/KuhnPoker-v0", players(), out_dir=whole, **kwargs)
    flaky = {"reference": Flaky(ReferenceAgent(), 3), "random": RandomAgent(0, per_decision_seed=True)}
    with pytest.raises(KeyboardInterrupt):
        run_arena("llm/KuhnPoker-v0", flaky, out_dir=parts, **kwargs)
    with pytest.raises(RunnerError, match="already holds a tournament"):
        run_arena("llm/KuhnPoker-v0", players(), out_dir=parts, **kwargs)
    with pytest.raises(RunnerError, match="other settings"):
        run_arena("llm/KuhnPoker-v0", players(), out_dir=parts, resume=True, **{**kwargs, "games": 4})
    # another agent under the same name (a resume with other sampling settings mixed two agents'
    # games under one name: only the names were compared)
    reseeded = {**players(), "random": RandomAgent(1, per_decision_seed=True)}
    with pytest.raises(RunnerError, match=r"other settings \(agent_settings\.random\.seed: 0 -> 1\)"):
        run_arena("llm/KuhnPoker-v0", reseeded, out_dir=parts, resume=True, **kwargs)
    resumed = run_arena("llm/KuhnPoker-v0", players(), out_dir=parts, resume=True, **kwargs)
    assert resumed["settings"]["games_resumed"] > 0
    assert resumed["ratings"] == expected["ratings"] and resumed["head_to_head"] == expected["head_to_head"]
    assert outcomes(parts) == outcomes(whole)


def test_a_bad_confidence_is_refused_before_any_game_is_played(tmp_path):
    with pytest.raises(ValueError, match="confidence"):
        run_arena("llm/KuhnPoker-v0", players(), out_dir=tmp_path / "a", confidence=1.5, progress=False, plot=False)
    assert not (tmp_path / "a" / "games.jsonl").exists()


def test_resuming_a_tournament_with_a_damaged_match_file_moves_the_bad_line_aside(tmp_path):
    # It stopped with an error that advised --resume, which is what it was doing.
    kwargs = dict(rounds=1, games=3, progress=False, plot=False)
    expected = run_arena("llm/KuhnPoker-v0", players(), out_dir=tmp_path / "whole", **kwargs)
    out = tmp_path / "damaged"
    run_arena("llm/KuhnPoker-v0", players(), out_dir=out, **kwargs)
    match = sorted((out / "matches").glob("*.jsonl"))[0]
    lines = match.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"seed"', '"seeds"', 1)  # (its checksum no longer matches)
    match.write_text("".join(lines))
    resumed = run_arena("llm/KuhnPoker-v0", players(), out_dir=out, resume=True, **kwargs)
    assert resumed["ratings"] == expected["ratings"]
    assert match.with_name(match.name + ".rejected").exists()


def test_swiss_rounds_pair_new_opponents_and_give_byes(tmp_path):
    agents = {"reference": ReferenceAgent(), **{f"random{i}": RandomAgent(i, per_decision_seed=True) for i in range(4)}}
    summary = run_arena("llm/TicTacToe-v0", agents, out_dir=tmp_path, fmt="swiss", rounds=3, games=1,
                        progress=False, plot=False)
    matches = summary["matches"]
    assert [m["round"] for m in matches] == [0, 0, 1, 1, 2, 2]
    pairs = [frozenset(m["agents"]) for m in matches]
    assert len(set(pairs)) == len(pairs)  # five agents, three rounds: no rematch needed
    assert len(summary["byes"]) == 3 and len({b["agent"] for b in summary["byes"]}) == 3
    assert summary["ratings"][0]["agent"] == "reference"


def test_swiss_pairing_prefers_opponents_not_yet_met():
    pairs, byes = swiss_pairings(["a", "b", "c", "d"], {frozenset("ab"): 1})
    assert pairs == [("a", "c"), ("b", "d")] and byes == []
    pairs, byes = swiss_pairings(["a", "b", "c"], {})
    assert pairs == [("a", "b")] and byes == ["c"]
    pairs, byes = swiss_pairings(["a", "b", "c"], {frozenset("ab"): 1}, {"c": 1})
    assert pairs == [("a", "c")] and byes == ["b"]


def test_ratings_arithmetic():
    assert rank_by_score({"a": 3.0, "b": 3.0, "c": -1.0}) == {"a": 0, "b": 0, "c": 2}
    rows = rate_contests(["x", "y"], [Contest({"x": 1.0, "y": -1.0})] * 5 + [Contest({"x": 0.0, "y": 0.0})])
    x, y = rows
    assert (x.agent, x.wins, x.draws, x.losses, x.games) == ("x", 5, 1, 0, 6)
    assert x.score == pytest.approx(5.5 / 6) and y.score == pytest.approx(0.5 / 6)
    assert x.mu > 25 > y.mu and x.sigma < 25 / 3
    assert rate_contests(["x", "y"], [])[0].mu == 25.0
    # More than two seats: the majority of the pairwise results. Three co-leaders each beat one
    # agent and drew two (a draw each, not three wins); b lost to a and drew c (a draw).
    rows = {r.agent: (r.wins, r.draws, r.losses) for r in rate_contests("abcd", [Contest({"a": 1, "b": 1, "c": 1, "d": 0})])}
    assert rows == {"a": (0, 1, 0), "b": (0, 1, 0), "c": (0, 1, 0), "d": (0, 0, 1)}
    rows = {r.agent: (r.wins, r.draws, r.losses) for r in rate_contests("abc", [Contest({"a": 2, "b": 1, "c": 1})])}
    assert rows == {"a": (1, 0, 0), "b": (0, 1, 0), "c": (0, 1, 0)}
    with pytest.raises(ValueError, match="unknown rating model"):
        rate_contests(["x"], [], model="elo")


def test_cli_arena_writes_the_run_and_prints_the_table(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["arena", "llm/TicTacToe-v0", "--agent", "solver=reference", "--agent", "random", "--agent",
                 "random:5", "--games", "1", "--rounds", "2", "--out", str(out), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "solver" in printed and "95% interval" in printed and "head-to-head" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["agents"] == {"solver": "reference", "random": "random", "random:5": "random:5"}
    assert len(summary["matches"]) == 6  # three pairings, two rounds
    assert (out / "plot.png").exists() or "matplotlib" not in printed
    assert main(["arena", "llm/TicTacToe-v0", "--agent", "reference", "--out", str(tmp_path / "x")]) == 2
    assert main(["arena", "llm/TicTacToe-v0", "--agent", "random", "--agent", "random", "--out",
                 str(tmp_path / "y")]) == 2
    assert main(["arena", "llm/Signalling-v0", "--agent", "a=random", "--agent", "b=random", "--out",
                 str(tmp_path / "z")]) == 0  # any multi-agent environment works


def test_cli_arena_an_infrastructure_failure_leaves_the_tournament_incomplete_and_resumable(tmp_path, capsys):
    # A server that goes down mid-tournament must not hand its games to the opponent: the CLI
    # stops with exit 3, keeps the finished games, and --resume plays the rest to the result of
    # an uninterrupted tournament.
    healed = tmp_path / "healed"
    agents_file = tmp_path / "agents.yaml"
    agents_file.write_text(
        "solver:\n  spec: py:tests.games.server_down_agent:ServerDownAgent\n"
        f"  answered: 6\n  healed: {healed}\nrandom: random\n"
    )
    common = ["arena", "llm/TicTacToe-v0", "--agents-file", str(agents_file), "--games", "2", "--rounds", "2",
              "--no-progress", "--no-plot", "--no-report"]
    out = tmp_path / "run"
    assert main([*common, "--out", str(out)]) == 3
    assert "incomplete" in capsys.readouterr().err
    assert not (out / "summary.json").exists()
    finished = (out / "games.jsonl").read_text().splitlines() if (out / "games.jsonl").exists() else []
    assert all(json.loads(line)["episode"]["rewards"] for line in finished)
    healed.write_text("")
    assert main([*common, "--out", str(out), "--resume"]) == 0
    clean = tmp_path / "clean"
    assert main([*common, "--out", str(clean)]) == 0
    resumed, expected = (json.loads((d / "summary.json").read_text()) for d in (out, clean))
    assert resumed["ratings"] == expected["ratings"] and resumed["head_to_head"] == expected["head_to_head"]
    assert outcomes(out) == outcomes(clean)


def test_cli_arena_refuses_an_agents_file_that_names_a_competitor_twice(tmp_path, capsys):
    # (YAML kept the last "a": one competitor was dropped without a word)
    agents = tmp_path / "agents.yaml"
    agents.write_text("a: random\nb: reference\na: random:7\n")
    status = main(["arena", "llm/KuhnPoker-v0", "--agents-file", str(agents), "--out", str(tmp_path / "out"),
                   "--no-progress", "--no-plot"])
    assert status == 2 and "'a' is given twice" in capsys.readouterr().err
