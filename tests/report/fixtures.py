"""Run directories for the report tests, made from real episodes.

* evaluation runs: the real ``llm-envs eval`` command (reference and random agents);
* a training run: ``metrics.jsonl`` with the names ``llm-train`` logs (taken from a real run of
  ``signalling_at_grpo_l1``), ``config.yaml`` and ``eval/step_*.jsonl`` of real episodes;
* an arena run: the arena's directory contract (format version 1) around real episodes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from llm_envs.agents.spec import resolve_agents
from llm_envs.cli import main as llm_envs_main
from llm_envs.episodes import EpisodeResult, load_episodes
from llm_envs.runner import run_episodes

EVAL_ENV = "llm/PlanPath-v0"
EVAL_EPISODES = 8
SIGNALLING = "llm/Signalling-v0"


def eval_run(directory: Path, agent: str, episodes: int = EVAL_EPISODES, env_id: str = EVAL_ENV) -> Path:
    """A real evaluation run through the command line (which also writes its report.html)."""
    status = llm_envs_main(["eval", env_id, "--agent", agent, "--episodes", str(episodes), "--seed", "0",
                            "--concurrency", "4", "--out", str(directory), "--no-progress", "--no-plot"])
    assert status == 0
    return directory


def episodes_of(run: Path) -> list[EpisodeResult]:
    return sorted(load_episodes(run / "episodes.jsonl"), key=lambda e: e.index)


def rewrite_episodes(run: Path, edit: Any) -> None:
    """Apply ``edit(dict)`` to every episodes.jsonl line (to make hostile or damaged data)."""
    path = run / "episodes.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(_reencode(edit(line)) for line in lines))


def _reencode(line: dict[str, Any]) -> str:
    """The edited line checksummed again, as the runner writes it (an edit is not damage here)."""
    from llm_envs.episodes import EpisodeResult, encode_episode_line

    fields = {k: v for k, v in line.items() if k not in ("checksum", "format_version")}
    return encode_episode_line(EpisodeResult.from_dict(fields))


# ---------------------------------------------------------------------------- training
# The names `llm-train signalling_at_grpo_l1` logs (one shared policy; speaker and listener).
ROLLOUT_KEYS = ("rollout/correct_rounds", "rollout/reward/listener", "rollout/reward/speaker", "rollout/success",
                "rollout/truncated", "rollout/turns", "rollout/record_reward", "rollout/format_ok",
                "rollout/completion_len", "rollout/uniform_group_frac", "rollout/record_reward/speaker",
                "rollout/record_reward/listener", "rollout/trained_records")
TRAIN_KEYS = ("loss", "pg_loss", "kl", "entropy", "clip_frac", "grad_norm", "ratio_max", "lr", "samples")
TIME_KEYS = ("time/generate_s", "time/env_s", "time/logprob_s", "time/advantage_s", "time/update_s", "time/push_s")
OTHER_KEYS = ("push/weight_push_bytes", "tokens/generated", "tokens/trained", "throughput/generated_tok_s",
              "throughput/trained_tok_s")
EVAL_KEYS = ("eval/correct_rounds", "eval/success", "eval/turns", "eval/reward/listener", "eval/reward/speaker",
             "eval/format_ok", "eval/completion_len", "eval/errors")


def training_run(directory: Path, *, steps: int = 6, eval_every: int = 3, eval_episodes: int = 6,
                 phase: float = 0.0) -> Path:
    """A training run directory in llm-train's layout, with smooth made-up curves and the real
    episodes of each evaluation step."""
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "run": {"name": "signalling_at_grpo_l1", "steps": steps, "eval_every": eval_every,
                "eval_episodes": eval_episodes, "output_dir": str(directory)},
        "env": {"id": SIGNALLING, "kwargs": {}, "num_envs": 8},
        "model": {"path": "tiny:llm/Signalling-v0", "level": "L1"},
        "rollout": {"engine": "hf", "tree": True, "k": 4, "temperature": 1.0},
        "algorithm": {"estimator": "at_grpo"},
        "train": {"lr": 0.002},
    }
    (directory / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    rows = []
    for step in range(steps + 1):
        row: dict[str, Any] = {"step": step}
        progress = step / steps
        if step > 0:
            for key in ROLLOUT_KEYS:
                row[key] = round(0.1 + 0.6 * progress + 0.05 * math.sin(step + phase), 4)
            for key in TRAIN_KEYS:
                row[f"train/shared/{key}"] = round(0.02 * (1 + math.cos(step + phase)), 5)
            for i, key in enumerate(TIME_KEYS):
                row[key] = 0.1 * (i + 1)
            row["time/step_s"] = sum(0.1 * (i + 1) for i in range(len(TIME_KEYS)))
            for key in OTHER_KEYS:
                row[key] = 64.0 + step
        if step % eval_every == 0 or step == steps:
            for key in EVAL_KEYS:
                row[key] = round(0.05 + 0.5 * progress, 4)
            agents = resolve_agents({None: "random" if step < steps else "reference"}, ["speaker", "listener"])
            out = directory / "eval" / f"step_{step:08d}.jsonl"
            out.parent.mkdir(exist_ok=True)
            run_episodes(SIGNALLING, agents, eval_episodes, seed=1_000_000_000, concurrency=eval_episodes,
                         out_path=out)
        rows.append(row)
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


# ---------------------------------------------------------------------------- arena
ARENA_AGENTS = {"alpha": "reference", "beta": "random", "gamma": "random"}


def arena_run(directory: Path, games_per_order: int = 2) -> Path:
    """An arena run in the arena's format (version 1): every ordered pair of agents plays
    ``games_per_order`` Signalling games (first agent as speaker); the higher return wins. The
    last game line has no episode (a reader must cope)."""
    directory.mkdir(parents=True, exist_ok=True)
    games: list[dict[str, Any]] = []
    names = list(ARENA_AGENTS)
    seed = 100
    for a in names:
        for b in names:
            if a == b:
                continue
            seats = {a: "speaker", b: "listener"}
            agents = resolve_agents({"speaker": ARENA_AGENTS[a], "listener": ARENA_AGENTS[b]}, ["speaker", "listener"])
            for episode in run_episodes(SIGNALLING, agents, games_per_order, seed=seed, concurrency=2):
                episode.agents = {seat: name for name, seat in seats.items()}
                # Signalling is cooperative: the outcome is made up from the seed (a, b or a
                # draw in turn), with zero-sum returns as a two-player game would have.
                winner = (a, b, None)[episode.seed % 3]
                returns = {name: 0.0 if winner is None else 1.0 if name == winner else -1.0 for name in seats}
                games.append({"game_index": len(games), "seed": episode.seed, "seats": seats, "winner": winner,
                              "returns": returns, "episode": episode.to_dict()})
            seed += games_per_order
    games[-1] = {k: v for k, v in games[-1].items() if k != "episode"}
    head_to_head: dict[str, dict[str, dict[str, Any]]] = {a: {} for a in names}
    for game in games:
        a, b = list(game["seats"])
        for me, other in ((a, b), (b, a)):
            cell = head_to_head[me].setdefault(other, {"wins": 0, "draws": 0, "losses": 0, "games": 0})
            cell["games"] += 1
            if game["winner"] is None:
                cell["draws"] += 1
            elif game["winner"] == me:
                cell["wins"] += 1
            else:
                cell["losses"] += 1
    for row in head_to_head.values():
        for cell in row.values():
            cell["score"] = (cell["wins"] + 0.5 * cell["draws"]) / cell["games"]
    ratings = []
    for name in names:
        cells = head_to_head[name].values()
        wins, draws, losses = (sum(c[k] for c in cells) for k in ("wins", "draws", "losses"))
        played = wins + draws + losses
        score = (wins + 0.5 * draws) / played
        mu, sigma = 25 + 10 * (score - 0.5), 3.0 / (1 + played / 8)
        ratings.append({"agent": name, "mu": mu, "sigma": sigma, "rating": mu, "ci_low": mu - 1.96 * sigma,
                        "ci_high": mu + 1.96 * sigma, "games": played, "wins": wins, "draws": draws, "losses": losses,
                        "score": score})
    summary = {"kind": "arena", "format_version": 1, "env_id": SIGNALLING, "agents": dict(ARENA_AGENTS),
               "ratings": ratings, "head_to_head": head_to_head,
               "settings": {"games_per_pair": 2 * games_per_order, "rating": "fixture"}}
    (directory / "summary.json").write_text(json.dumps(summary, indent=2))
    (directory / "games.jsonl").write_text("".join(json.dumps(g) + "\n" for g in games))
    return directory
