"""Evaluation: run agents on an environment and report numbers a paper can quote.

* :func:`evaluate` plays a run and writes ``episodes.jsonl``, ``summary.json`` and ``plot.png``;
* :func:`summarize` / :func:`format_summary` / :func:`compare_summaries` turn results into
  numbers and tables, with 95% Wilson intervals for rates and Student-t intervals for means;
* :func:`run_demo` plays every registered environment with its reference and random agents;
* :func:`load_episodes` / :func:`select_episodes` / :func:`episode_transcript` read saved
  episodes back as transcripts (``llm-envs show``).

The command line front end is ``llm-envs eval`` (:mod:`llm_envs.cli`).
"""

from llm_envs.evaluation.evaluate import evaluate, resolve_split, run_demo
from llm_envs.evaluation.stats import Interval, mean_interval, t_quantile, wilson_interval
from llm_envs.evaluation.summary import compare_summaries, format_summary, load_summary, summarize
from llm_envs.evaluation.transcripts import (
    TranscriptError,
    episode_transcript,
    load_episodes,
    select_episodes,
)

__all__ = [
    "Interval",
    "TranscriptError",
    "compare_summaries",
    "episode_transcript",
    "evaluate",
    "format_summary",
    "load_episodes",
    "load_summary",
    "mean_interval",
    "resolve_split",
    "run_demo",
    "select_episodes",
    "summarize",
    "t_quantile",
    "wilson_interval",
]
