"""Tournaments among agents on any multi-player environment: round-robin or Swiss, every seat
played by everyone, fixed seeds, ratings with confidence intervals (``llm-envs arena``).

A *game* is one episode, played by the runner (:mod:`llm_envs.runner`) and kept whole in
``games.jsonl``. A *match* is a set of agents playing ``games`` seeds, each seed once in every
rotation of the seats (duplicate play: the same deals from every seat); it is the rated contest,
each agent scoring the sum of its returns over the match, which makes zero-sum chip games rate
fairly. A *round* plays one match per set of agents (round-robin) or pairs agents of similar
standing who have not met (Swiss; an odd agent out sits out). Round ``r`` plays seeds
``seed + r·games …`` in every match, so all agents face the same deals.

The run directory (``summary.json``, ``games.jsonl``, ``matches/`` with the runner's own files,
``settings.json``, ``plot.png``; format version 1) is a contract that docs/arena.md specifies
field by field, with the rating model and how a tournament resumes.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llm_envs.agents.base import Agent
from llm_envs.core.writing import json_text
from llm_envs.episodes import EpisodeResult, RunnerError, load_episodes
from llm_envs.games.ratings import Contest, RatingRow, rate_contests
from llm_envs.runner import Runner

__all__ = [
    "FORMAT_VERSION",
    "FORMATS",
    "Match",
    "format_arena",
    "game_line",
    "plot_arena",
    "round_robin_schedule",
    "run_arena",
    "swiss_pairings",
]

FORMAT_VERSION = 1
FORMATS = ("round_robin", "swiss")
SUMMARY_FILE, GAMES_FILE, SETTINGS_FILE, PLOT_FILE, MATCHES_DIR = (
    "summary.json", "games.jsonl", "settings.json", "plot.png", "matches",
)


@dataclass(frozen=True)
class Match:
    """One rated contest (see the module docstring).

    Attributes:
        index: Position in the tournament (matches are played in this order).
        round: The round it belongs to.
        agents: Participants; rotation ``r`` seats ``agents[(i + r) % k]`` at seat ``i``.
        seed: The first seed (the match plays ``seed … seed + games − 1``).
    """

    index: int
    round: int
    agents: tuple[str, ...]
    seed: int


def round_robin_schedule(agents: Sequence[str], seats: int, rounds: int, games: int, seed: int) -> list[Match]:
    """Every set of ``seats`` agents meets once per round, in a fixed order."""
    matches = []
    for r in range(rounds):
        for group in itertools.combinations(agents, seats):
            matches.append(Match(len(matches), r, tuple(group), seed + r * games))
    return matches


def swiss_pairings(
    standings: Sequence[str], met: Mapping[frozenset[str], int], byes: Mapping[str, int] | None = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """Pair agents listed best first: each takes the best-placed agent below it that it has met
    least often (first-time opponents first). With an odd number, the lowest-placed agent among
    those with the fewest byes so far sits out. Returns the pairs and the agents with a bye."""
    unpaired = list(standings)
    sitting_out: list[str] = []
    if len(unpaired) % 2:
        byes = byes or {}
        fewest = min(byes.get(a, 0) for a in unpaired)
        bye = next(a for a in reversed(unpaired) if byes.get(a, 0) == fewest)
        unpaired.remove(bye)
        sitting_out.append(bye)
    pairs: list[tuple[str, str]] = []
    while len(unpaired) >= 2:
        first = unpaired.pop(0)
        fewest = min(met.get(frozenset((first, other)), 0) for other in unpaired)
        partner = next(o for o in unpaired if met.get(frozenset((first, o)), 0) == fewest)
        unpaired.remove(partner)
        pairs.append((first, partner))
    return pairs, sitting_out


def seat_order(match: Match, rotation: int) -> tuple[str, ...]:
    """The agents in seat order for one rotation of a match."""
    k = len(match.agents)
    return tuple(match.agents[(i + rotation) % k] for i in range(k))


def game_line(match: Match, rotation: int, games: int, seats: Sequence[str], result: EpisodeResult) -> dict[str, Any]:
    """The ``games.jsonl`` line of one game (format in the module docstring)."""
    k = len(match.agents)
    order = seat_order(match, rotation)
    returns = {name: float(result.rewards.get(seat, 0.0)) for name, seat in zip(order, seats)}
    best = max(returns.values())
    leaders = [name for name, value in returns.items() if value == best]
    return {
        "game_index": match.index * k * games + rotation * games + result.index,
        "match": match.index,
        "round": match.round,
        "rotation": rotation,
        "seed": result.seed,
        "seats": dict(zip(order, seats)),
        "winner": leaders[0] if len(leaders) == 1 else None,
        "returns": returns,
        "episode": result.to_dict(),
    }


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json_text(data, indent=2, default=repr) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _write_lines(path: Path, lines: Sequence[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json_text(line) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class _GamesLog:
    """Appends game lines as games finish (flushed), for anyone watching the run."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", encoding="utf-8")

    def write(self, line: dict[str, Any]) -> None:
        self._file.write(json_text(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def run_arena(
    env_id: str,
    agents: Mapping[str, Agent],
    *,
    out_dir: str | os.PathLike[str],
    specs: Mapping[str, str] | None = None,
    fmt: str = "round_robin",
    rounds: int = 1,
    games: int = 1,
    seed: int = 0,
    concurrency: int = 8,
    env_kwargs: Mapping[str, Any] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    plot: bool = True,
    model: str = "plackett_luce",
    confidence: float = 0.95,
    settings: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    env_url: str | None = None,
) -> dict[str, Any]:
    """Play a tournament, write the run directory and return ``summary.json``'s content.

    Args:
        env_id: A registered environment with at least two seats.
        agents: Agent name → agent (names are what the tables show; each agent plays under its
            name, so an agent's ``name`` is set to it).
        out_dir: The run directory (format in the module docstring).
        specs: Agent name → spec string, recorded in the summary (default: the agents' names).
        fmt: ``"round_robin"`` or ``"swiss"`` (two-player games).
        rounds: Round-robin: matches per set of agents; Swiss: rounds.
        games: Seeds per match (each played in every seat rotation).
        seed: First seed of round 0.
        concurrency: Games in play at once within a match.
        env_kwargs: Environment options.
        resume: Continue the run in ``out_dir`` (same settings).
        overwrite: Replace a previous run in ``out_dir``.
        progress: Show a progress bar.
        plot: Draw ``plot.png`` (needs matplotlib).
        model: OpenSkill model (:data:`~llm_envs.games.ratings.MODELS`).
        confidence: Level of the rating intervals.
        settings: More facts for ``summary.json``'s settings (e.g. the command line).
        log: Where notes go.
        env_url: Play every game on the ``llm-envs serve`` server at this URL (serving
            ``env_id``), each game in its own session (:func:`llm_envs.remote`).
    """
    import llm_envs

    log = log or (lambda message: None)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if rounds < 1 or games < 1:
        raise ValueError("rounds and games must be >= 1")
    if not 0 < confidence < 1:  # (checked before any game is played, not after all of them)
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    names = list(agents)
    if len(set(names)) != len(names):
        raise ValueError(f"agent names must be unique: {names}")
    env_kwargs = dict(env_kwargs or {})
    probe = llm_envs.make(env_id, **env_kwargs)
    seat_ids = list(probe.possible_agents)
    probe.close()
    k = len(seat_ids)
    if k < 2:
        raise ValueError(f"{env_id} has {k} seat(s): an arena needs a game for two or more players")
    if len(names) < k:
        raise ValueError(f"{env_id} seats {k} players: give at least {k} agents (got {len(names)})")
    if fmt == "swiss" and k != 2:
        raise ValueError("the Swiss format pairs agents: it needs a two-player game (use round_robin)")
    for name, agent in agents.items():
        agent.name = name

    out = Path(out_dir)
    run_settings = {
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "agents": {n: (specs or {}).get(n, n) for n in names},
        # What each agent plays with (its sampling options, its file's entries): a resume with
        # other ones mixed two agents' games under one name.
        "agent_settings": {n: agents[n].settings() if hasattr(agents[n], "settings") else None for n in names},
        "format": fmt,
        "rounds": rounds,
        "games_per_match": games,
        "seed": seed,
        "seats": seat_ids,
        "rating_model": model,
        "confidence": confidence,
    }
    _prepare_directory(out, run_settings, resume=resume, overwrite=overwrite)
    (out / MATCHES_DIR).mkdir(parents=True, exist_ok=True)

    matches_per_round = (
        len(list(itertools.combinations(names, k))) if fmt == "round_robin" else len(names) // 2
    )
    total_games = rounds * matches_per_round * k * games
    bar = _progress_bar(total_games, env_id) if progress else None
    played: dict[int, list[list[EpisodeResult]]] = {}
    schedule: list[Match] = []
    byes: list[dict[str, Any]] = []
    started = time.perf_counter()
    resumed = 0
    # Lines already on disk (from match files) first, so games.jsonl is whole while we play.
    _write_lines(out / GAMES_FILE, [])
    games_log = _GamesLog(out / GAMES_FILE)
    try:
        if fmt == "round_robin":
            rounds_of_matches = _group_by_round(round_robin_schedule(names, k, rounds, games, seed))
        else:
            rounds_of_matches = None
        for r in range(rounds):
            if rounds_of_matches is not None:
                matches = rounds_of_matches[r]
            else:
                bye_counts = {a: sum(1 for b in byes if b["agent"] == a) for a in names}
                matches, sitting_out = _swiss_round(
                    names, seat_ids, schedule, played, games, seed, r, model, confidence, bye_counts
                )
                byes += [{"round": r, "agent": a} for a in sitting_out]
            for match in matches:
                schedule.append(match)
                results, from_disk = _play_match(
                    env_id, match, agents, seat_ids, games, env_kwargs, out, concurrency, games_log, bar, env_url
                )
                played[match.index] = results
                resumed += from_disk
    finally:
        games_log.close()
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - started

    lines = [game_line(m, r, games, seat_ids, res) for m in schedule for r, rot in enumerate(played[m.index]) for res in rot]
    lines.sort(key=lambda line: line["game_index"])
    _write_lines(out / GAMES_FILE, lines)
    summary = summarize_arena(
        env_id, names, run_settings["agents"], schedule, played, seat_ids, games, model=model, confidence=confidence
    )
    summary["byes"] = byes
    summary["settings"] = {
        **run_settings,
        "matches": len(schedule),
        "games": len(lines),
        "games_played_now": len(lines) - resumed,
        "games_resumed": resumed,
        "wall_s": wall,
        **dict(settings or {}),
    }
    _write_json(out / SUMMARY_FILE, summary)
    if plot:
        from llm_envs.evaluation.plot import PLOT_MISSING, plot_available

        if plot_available():
            plot_arena(summary, out / PLOT_FILE)
        else:
            log(PLOT_MISSING)
    return summary


def _prepare_directory(out: Path, run_settings: dict[str, Any], *, resume: bool, overwrite: bool) -> None:
    settings_path = out / SETTINGS_FILE
    if settings_path.exists() or (out / MATCHES_DIR).exists():
        if resume:
            try:
                previous = json.loads(settings_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise RunnerError(f"{out} holds no readable {SETTINGS_FILE}: cannot resume ({exc})") from exc
            from llm_envs.evaluation.evaluate import settings_diff

            previous_cmp = json.loads(json.dumps(previous, default=repr))
            current_cmp = json.loads(json.dumps(run_settings, default=repr))
            if "agent_settings" not in previous_cmp:  # (written before they were recorded)
                current_cmp.pop("agent_settings", None)
            if previous_cmp != current_cmp:
                changed = settings_diff(previous_cmp, current_cmp)
                raise RunnerError(f"{out} holds a tournament with other settings ({'; '.join(changed[:8])}); "
                                  "resume it with the same ones, or choose another --out")
            return
        if not overwrite:
            raise RunnerError(f"{out} already holds a tournament; pass --resume to continue it, "
                              "--overwrite to replace it, or choose another --out")
        for name in (SUMMARY_FILE, GAMES_FILE, SETTINGS_FILE, PLOT_FILE):
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / MATCHES_DIR, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(settings_path, run_settings)


def _group_by_round(matches: Sequence[Match]) -> dict[int, list[Match]]:
    grouped: dict[int, list[Match]] = {}
    for match in matches:
        grouped.setdefault(match.round, []).append(match)
    return grouped


def _swiss_round(
    names: Sequence[str],
    seat_ids: Sequence[str],
    schedule: Sequence[Match],
    played: Mapping[int, list[list[EpisodeResult]]],
    games: int,
    seed: int,
    round_index: int,
    model: str,
    confidence: float,
    byes: Mapping[str, int],
) -> tuple[list[Match], list[str]]:
    contests = [Contest(_match_scores(m, played[m.index], seat_ids)) for m in schedule]
    rows = {row.agent: row for row in rate_contests(names, contests, model=model, confidence=confidence)}
    standings = sorted(names, key=lambda a: (-rows[a].score, -rows[a].mu, names.index(a)))
    met: dict[frozenset[str], int] = {}
    for m in schedule:
        met[frozenset(m.agents)] = met.get(frozenset(m.agents), 0) + 1
    pairs, sitting_out = swiss_pairings(standings, met, byes)
    first = len(schedule)
    matches = [Match(first + i, round_index, pair, seed + round_index * games) for i, pair in enumerate(pairs)]
    return matches, sitting_out


def _remote_env(url: str) -> Callable[..., Any]:
    from functools import partial

    from llm_envs.interop.remote import RemoteEnv

    return partial(RemoteEnv, url)


def _play_match(
    env_id: str,
    match: Match,
    agents: Mapping[str, Agent],
    seat_ids: Sequence[str],
    games: int,
    env_kwargs: Mapping[str, Any],
    out: Path,
    concurrency: int,
    games_log: _GamesLog,
    bar: Any,
    env_url: str | None = None,
) -> tuple[list[list[EpisodeResult]], int]:
    """Play every rotation of a match (continuing what its files hold); return the results
    per rotation and how many games came from disk."""
    rotations: list[list[EpisodeResult]] = []
    from_disk = 0
    for rotation in range(len(match.agents)):
        order = seat_order(match, rotation)
        path = out / MATCHES_DIR / f"match{match.index:05d}-rotation{rotation}.jsonl"
        # (bad lines skipped here: the runner's resume moves them to .rejected and plays them)
        before = {e.index for e in load_episodes(path, problems=[])} if path.exists() else set()

        def on_episode(result: EpisodeResult, rotation: int = rotation) -> None:
            games_log.write(game_line(match, rotation, games, seat_ids, result))
            if bar is not None:
                bar.update(1)

        runner = Runner(
            _remote_env(env_url) if env_url else env_id,
            {seat: agents[name] for seat, name in zip(seat_ids, order)},
            games,
            seed=match.seed,
            concurrency=min(concurrency, games),
            env_kwargs=env_kwargs,
            out_path=path,
            resume=True,
            on_episode=on_episode,
            env_label=env_id,
        )
        results = runner.run()
        for result in results:
            if result.index in before:
                games_log.write(game_line(match, rotation, games, seat_ids, result))
                if bar is not None:
                    bar.update(1)
        from_disk += runner.resumed_episodes
        rotations.append(results)
    return rotations, from_disk


def _match_scores(
    match: Match, rotations: Sequence[Sequence[EpisodeResult]], seat_ids: Sequence[str]
) -> dict[str, float]:
    """Each participant's total return over the match (its score as a contest)."""
    totals = dict.fromkeys(match.agents, 0.0)
    for rotation, results in enumerate(rotations):
        for result in results:
            for name, seat in zip(seat_order(match, rotation), seat_ids):
                totals[name] += float(result.rewards.get(seat, 0.0))
    return totals


def summarize_arena(
    env_id: str,
    names: Sequence[str],
    specs: Mapping[str, str],
    schedule: Sequence[Match],
    played: Mapping[int, list[list[EpisodeResult]]],
    seat_ids: Sequence[str],
    games: int,
    *,
    model: str = "plackett_luce",
    confidence: float = 0.95,
) -> dict[str, Any]:
    """``summary.json``'s ratings, head-to-head table and match list (format in the module
    docstring)."""
    contests, match_list = [], []
    episodes = dict.fromkeys(names, 0)
    return_sums = dict.fromkeys(names, 0.0)
    pair_stats: dict[str, dict[str, dict[str, float]]] = {
        a: {b: {"wins": 0, "draws": 0, "losses": 0, "games": 0, "episodes": 0, "return_sum": 0.0}
            for b in names if b != a}
        for a in names
    }
    for match in schedule:
        rotations = played[match.index]
        scores = _match_scores(match, rotations, seat_ids)
        contests.append(Contest(scores))
        match_games = sum(len(r) for r in rotations)
        for name in match.agents:
            episodes[name] += match_games
            return_sums[name] += scores[name]
        for a in match.agents:
            for b in match.agents:
                if a == b:
                    continue
                stats = pair_stats[a][b]
                stats["games"] += 1
                stats["episodes"] += match_games
                stats["return_sum"] += scores[a]
                key = "wins" if scores[a] > scores[b] else "losses" if scores[a] < scores[b] else "draws"
                stats[key] += 1
        match_list.append({**asdict(match), "agents": list(match.agents), "scores": scores, "games": match_games})
    rows: list[RatingRow] = rate_contests(names, contests, model=model, confidence=confidence)
    ratings = []
    for row in rows:
        data = row.to_dict()
        data["episodes"] = episodes[row.agent]
        data["mean_return"] = return_sums[row.agent] / episodes[row.agent] if episodes[row.agent] else 0.0
        ratings.append(data)
    head_to_head: dict[str, dict[str, dict[str, Any]]] = {}
    for a, row in pair_stats.items():
        head_to_head[a] = {}
        for b, s in row.items():
            if not s["games"]:
                continue
            head_to_head[a][b] = {
                "wins": int(s["wins"]),
                "draws": int(s["draws"]),
                "losses": int(s["losses"]),
                "games": int(s["games"]),
                "score": (s["wins"] + 0.5 * s["draws"]) / s["games"],
                "episodes": int(s["episodes"]),
                "mean_return": s["return_sum"] / s["episodes"] if s["episodes"] else 0.0,
            }
    return {
        "kind": "arena",
        "format_version": FORMAT_VERSION,
        "env_id": env_id,
        "agents": dict(specs),
        "ratings": ratings,
        "head_to_head": head_to_head,
        "matches": match_list,
    }


def _progress_bar(total: int, label: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=f"arena {label}", unit="game", dynamic_ncols=True)


def format_arena(summary: Mapping[str, Any]) -> str:
    """The ratings table and the head-to-head scores as text."""
    from llm_envs.evaluation.summary import _table

    settings = summary.get("settings", {})
    conf = int(round(100 * float(settings.get("confidence", 0.95))))
    rows = []
    for rank, r in enumerate(summary["ratings"], 1):
        rows.append([
            str(rank), r["agent"], f"{r['mu']:.2f}", f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]", f"{r['rating']:.2f}",
            f"{r['score']:.3f}", f"{r['wins']}-{r['draws']}-{r['losses']}", str(r["games"]), str(r.get("episodes", "")),
            f"{r.get('mean_return', 0.0):+.3f}",
        ])
    header = ["#", "agent", "mu", f"{conf}% interval", "mu-3sigma", "score", "W-D-L", "matches", "games",
              "return/game"]
    lines = [
        f"arena {summary['env_id']}: {settings.get('format', '')}, {settings.get('matches', '?')} matches, "
        f"{settings.get('games', '?')} games ({settings.get('games_per_match', '?')} seed(s) per match, every seat)",
        _table(rows, header),
    ]
    names = [r["agent"] for r in summary["ratings"]]
    h2h = summary.get("head_to_head", {})
    if len(names) > 2:
        cells = [[a] + [("-" if a == b else f"{h2h.get(a, {}).get(b, {}).get('score', float('nan')):.2f}") for b in names]
                 for a in names]
        lines += ["", "head-to-head match score (row agent vs column agent):", _table(cells, ["", *names])]
    return "\n".join(lines)


def plot_arena(summary: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Ratings with their intervals, and the head-to-head score matrix, as a PNG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import numpy as np

    ratings = list(summary["ratings"])
    names = [r["agent"] for r in ratings]
    conf = int(round(100 * float(summary.get("settings", {}).get("confidence", 0.95))))
    fig, axes = plt.subplots(1, 2, figsize=(12, max(3.0, 0.5 * len(names) + 1.5)), constrained_layout=True)
    ax = axes[0]
    y = np.arange(len(names))[::-1]
    mu = np.array([r["mu"] for r in ratings])
    low = mu - np.array([r["ci_low"] for r in ratings])
    high = np.array([r["ci_high"] for r in ratings]) - mu
    ax.errorbar(mu, y, xerr=[low, high], fmt="o", capsize=4, color="#4C72B0")
    ax.set_yticks(y, names)
    ax.set_xlabel(f"rating μ with {conf}% interval")
    ax.set_title(f"{summary['env_id']}: ratings")
    ax = axes[1]
    h2h = summary.get("head_to_head", {})
    grid = np.full((len(names), len(names)), np.nan)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if b in h2h.get(a, {}):
                grid[i, j] = h2h[a][b]["score"]
    image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="RdYlGn")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_title("head-to-head match score (row vs column)")
    for i in range(len(names)):
        for j in range(len(names)):
            if not np.isnan(grid[i, j]):
                ax.annotate(f"{grid[i, j]:.2f}", (j, i), ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, shrink=0.8)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
