"""Ratings of agents from contest results, with OpenSkill (Weng–Lin Bayesian ratings; MIT,
pure Python, ``pip install openskill``).

Each contest (an arena *match*) ranks its participants; contests are applied one after
another in a fixed order, so the same results always give the same ratings. A rating is a
Gaussian belief ``N(μ, σ²)`` about the agent's skill; the table reports

* ``mu``, ``sigma``: the belief after every contest;
* ``rating``: OpenSkill's conservative *ordinal* ``μ − 3σ`` (what leaderboards sort by);
* ``ci_low``, ``ci_high``: ``μ ∓ z·σ``, the central ``confidence`` interval of the belief
  (z = 1.96 for 95%). Two agents whose intervals do not overlap are told apart by the data.

Defaults are OpenSkill's (Plackett–Luce model, μ₀ = 25, σ₀ = 25/3, β = 25/6, τ = 25/300).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

__all__ = ["MODELS", "Contest", "RatingRow", "rank_by_score", "rate_contests"]

MODELS = ("plackett_luce", "bradley_terry_full", "bradley_terry_part", "thurstone_mosteller_full",
          "thurstone_mosteller_part")


@dataclass(frozen=True)
class Contest:
    """One rated contest: participants and their scores (higher is better; equal = tie)."""

    scores: Mapping[str, float]


@dataclass
class RatingRow:
    """One agent's line of the ratings table (see the module docstring)."""

    agent: str
    mu: float
    sigma: float
    rating: float
    ci_low: float
    ci_high: float
    games: int
    wins: int
    draws: int
    losses: int
    score: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rank_by_score(scores: Mapping[str, float]) -> dict[str, int]:
    """Competition ranks (0 = best): an agent's rank is the number of agents that scored more."""
    return {a: sum(1 for b in scores.values() if b > s) for a, s in scores.items()}


def _model(name: str) -> Any:
    from openskill import models

    classes = {
        "plackett_luce": models.PlackettLuce,
        "bradley_terry_full": models.BradleyTerryFull,
        "bradley_terry_part": models.BradleyTerryPart,
        "thurstone_mosteller_full": models.ThurstoneMostellerFull,
        "thurstone_mosteller_part": models.ThurstoneMostellerPart,
    }
    if name not in classes:
        raise ValueError(f"unknown rating model {name!r}; choose one of {MODELS}")
    return classes[name]()


def rate_contests(
    agents: Sequence[str],
    contests: Sequence[Contest],
    *,
    model: str = "plackett_luce",
    confidence: float = 0.95,
) -> list[RatingRow]:
    """Rate ``agents`` from ``contests`` (applied in order); rows sorted best first (by μ).

    Wins, draws and losses count contests: against each other participant, an agent wins when
    it scored more, draws when equal (a contest of two agents is one win, draw or loss; with
    more, the agent's result is the majority — more than half — of its pairwise results, a
    draw where neither wins nor losses are the majority).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    skill = _model(model)
    ratings = {a: skill.rating(name=a) for a in agents}
    tally = {a: [0, 0, 0] for a in agents}  # wins, draws, losses
    for contest in contests:
        names = [a for a in contest.scores if a in ratings]
        if len(names) < 2:
            continue
        ranks = rank_by_score({a: contest.scores[a] for a in names})
        updated = skill.rate([[ratings[a]] for a in names], ranks=[ranks[a] for a in names])
        for a, team in zip(names, updated):
            ratings[a] = team[0]
        for a in names:
            # The majority of the agent's pairwise results (more than half of them): a win, a
            # loss, or else a draw. (Comparing the wins with the losses alone made three
            # co-leaders each win a match in which they beat one agent and drew two.)
            others = len(names) - 1
            beat = sum(1 for b in names if b != a and contest.scores[b] < contest.scores[a])
            beaten = sum(1 for b in names if b != a and contest.scores[b] > contest.scores[a])
            tally[a][0 if 2 * beat > others else 2 if 2 * beaten > others else 1] += 1
    rows = []
    for a in agents:
        r = ratings[a]
        wins, draws, losses = tally[a]
        played = wins + draws + losses
        rows.append(
            RatingRow(
                agent=a,
                mu=float(r.mu),
                sigma=float(r.sigma),
                rating=float(r.ordinal()),
                ci_low=float(r.mu - z * r.sigma),
                ci_high=float(r.mu + z * r.sigma),
                games=played,
                wins=wins,
                draws=draws,
                losses=losses,
                score=(wins + 0.5 * draws) / played if played else 0.0,
            )
        )
    rows.sort(key=lambda row: (-row.mu, row.agent))
    return rows
