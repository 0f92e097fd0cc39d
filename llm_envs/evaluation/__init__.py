"""Evaluation: run agents on an environment and report numbers a paper can quote.

* :func:`evaluate` plays a run and writes ``episodes.jsonl``, ``summary.json`` and ``plot.png``;
* :func:`summarize` / :func:`format_summary` turn results into numbers and tables, with 95%
  Wilson intervals for 0/1 and [0, 1] metrics and Student-t intervals for other means;
* :func:`compare_runs` compares two runs side by side and, on the seeds they share, with paired
  tests (McNemar exact, sign-flip permutation, paired bootstrap);
* :func:`run_demo` plays every registered environment with its reference and random agents;
* :func:`load_episodes` / :func:`select_episodes` / :func:`episode_transcript` read saved
  episodes back as transcripts (``llm-envs show``).

The command line front end is ``llm-envs eval`` (:mod:`llm_envs.cli`).
"""

from llm_envs.evaluation.compare import CompareError, compare_runs
from llm_envs.evaluation.evaluate import SettingsChangedError, evaluate, resolve_split, run_demo
from llm_envs.evaluation.stats import (
    Interval,
    mean_interval,
    metric_interval,
    paired_comparison,
    t_quantile,
    wilson_interval,
)
from llm_envs.evaluation.summary import compare_summaries, format_summary, load_summary, summarize
from llm_envs.evaluation.transcripts import (
    TranscriptError,
    episode_transcript,
    load_episodes,
    select_episodes,
)

__all__ = [
    "CompareError",
    "Interval",
    "SettingsChangedError",
    "TranscriptError",
    "compare_runs",
    "compare_summaries",
    "episode_transcript",
    "evaluate",
    "format_summary",
    "load_episodes",
    "load_summary",
    "mean_interval",
    "metric_interval",
    "paired_comparison",
    "resolve_split",
    "run_demo",
    "select_episodes",
    "summarize",
    "t_quantile",
    "wilson_interval",
]
