"""Games: exact measurement of agents on small OpenSpiel games, ratings, and the arena.

* :mod:`llm_envs.games.exploitability`: an agent's policy tabulated at every information state,
  its NashConv / exploitability and its value against Nash (OpenSpiel's algorithms);
* :mod:`llm_envs.games.ratings`: OpenSkill ratings with confidence intervals from game results;
* :mod:`llm_envs.games.arena`: round-robin and Swiss tournaments among agents (``llm-envs arena``).

Everything here imports ``open_spiel`` / ``openskill`` lazily (``pip install 'llm-envs[games]'``).
"""

from llm_envs.games.exploitability import (
    PolicyReport,
    TabulatedPolicy,
    measure_agent,
    nash_policy_for,
    tabulate_policy,
)

__all__ = ["PolicyReport", "TabulatedPolicy", "measure_agent", "nash_policy_for", "tabulate_policy"]
