"""One self-contained HTML report per run: evaluation, arena or training (``llm-envs report``).

:func:`write_report` reads one or more run directories and writes a single ``report.html``
that opens from disk in any browser, with no server and no network: the styles, the script,
the charts (inline SVG, :mod:`llm_envs.report.svg`) and the data are all inside it.

===============  =========================================================================
one evaluation   summary with intervals, per-agent rewards, format-error rates, failed calls,
                 turns and tokens; reward distributions; success by turn; every episode,
                 filterable, opened as a conversation (:mod:`~llm_envs.report.evaluation`)
several          the same seeds paired, the episodes where the runs differ first
evaluations      (:mod:`~llm_envs.report.compare`)
training         learning curves from ``metrics.jsonl``, evaluation transcripts at chosen steps
                 (:mod:`~llm_envs.report.training`); several runs share the charts
arena            ratings with intervals, the head-to-head matrix, the games
                 (:mod:`~llm_envs.report.arena`)
===============  =========================================================================

``llm-envs eval`` and ``llm-train`` write the report at the end of a run through
:func:`write_report_safely`, which never lets a report problem fail the run. The package
imports without torch and needs nothing beyond the core dependencies.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from llm_envs.report.runs import (
    ArenaRun,
    EvalRun,
    ReportError,
    TrainingRun,
    detect_kind,
    label_runs,
    load_run,
)

__all__ = ["REPORT_FILE", "ReportError", "build_report", "default_output", "detect_kind", "write_report",
           "write_report_safely"]

REPORT_FILE = "report.html"


def build_report(paths: Sequence[str | os.PathLike[str]], *, steps: Sequence[int] | None = None) -> str:
    """The HTML of the report of the runs at ``paths`` (see the module docstring).

    Args:
        paths: One run directory, or several evaluation runs (compared) or training runs (their
            curves overlaid).
        steps: Training runs: the evaluation steps whose transcripts to embed (default: up to five,
            evenly spaced, first and last included).

    Raises:
        ReportError: a path that is not a run, or runs that cannot share a report.
    """
    from llm_envs.report import arena, compare, evaluation, training
    from llm_envs.report.page import isolated, render_page

    if not paths:
        raise ReportError("no run directory given")
    runs = [load_run(p) for p in paths]
    kinds = sorted({run.kind for run in runs})
    if len(kinds) > 1:
        raise ReportError(f"cannot put different kinds of run in one report: {', '.join(kinds)}")
    if steps is not None and kinds != ["training"]:
        raise ReportError(f"--steps chooses evaluation steps of training runs; this is an {kinds[0]} run")
    label_runs(runs)
    data: dict[str, object] = {}
    evals = [run for run in runs if isinstance(run, EvalRun)]
    trainings = [run for run in runs if isinstance(run, TrainingRun)]
    arenas = [run for run in runs if isinstance(run, ArenaRun)]
    # Title and subtitle are the page's sentences around run text (names, paths): each piece of
    # run text isolated, so that its bidi controls cannot reorder the rest.
    if len(evals) == 1:
        run = evals[0]
        sections, data["datasets"] = evaluation.sections(run)
        title = f"Evaluation: {isolated(run.summary.get('env_id') or run.label)}"
        players = run.summary.get("agents") or {}
        subtitle = (evaluation.pairs_text(players) + f" · {len(run.episodes)} episodes · {isolated(run.path)}")
    elif evals:
        sections, data["datasets"], data["compare"] = compare.sections(evals)
        title = "Evaluation runs compared"
        subtitle = compare.compare_subtitle(evals)
    elif trainings:
        sections, data["datasets"] = training.sections(trainings, steps)
        names = [isolated((r.config.get("run") or {}).get("name") or r.label) for r in trainings]
        title = "Training: " + ", ".join(names)
        env_ids = sorted({isolated((r.config.get("env") or {}).get("id")) for r in trainings})
        subtitle = f"{', '.join(env_ids)} · " + ", ".join(isolated(r.path) for r in trainings)
    else:
        if len(arenas) > 1:
            raise ReportError("an arena report shows one arena run; pass one directory")
        run = arenas[0]
        sections, data["datasets"] = arena.sections(run)
        title = f"Arena: {isolated(run.summary.get('env_id') or run.label)}"
        subtitle = f"{arena.subtitle(run)} · {isolated(run.path)}"
    kind = runs[0].kind if len(runs) == 1 or runs[0].kind != "evaluation" else "compare"
    return render_page(title, kind, sections, data, subtitle=subtitle)


def default_output(paths: Sequence[str | os.PathLike[str]]) -> Path:
    """Where the report goes without ``-o``: ``RUN/report.html`` for one run; for several,
    ``compare.html`` in the first run's parent directory."""
    first = Path(paths[0])
    if first.is_file():
        first = first.parent
    if len(paths) == 1:
        return first / REPORT_FILE
    return first.resolve().parent / "compare.html"


def write_report(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None, *,
                 steps: Sequence[int] | None = None) -> Path:
    """Write the report of ``paths`` (see :func:`build_report`) to the file ``out`` (default
    :func:`default_output`), atomically: through a temporary file next to it, which is removed
    whatever fails. An ``out`` that is an existing directory is refused (:class:`ReportError`)
    before anything is read; so is a target that cannot be written. Returns the path written."""
    target = Path(out) if out is not None else default_output(paths)
    if target.is_dir():
        raise ReportError(f"{target} is a directory; the report is one file: name it, e.g. {target / REPORT_FILE}")
    html = build_report(paths, steps=steps)
    # A name of this process's own, created exclusively: two writers never share one, and what
    # is removed on failure is only ever the file this call made.
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    created = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        created = True
        with os.fdopen(fd, "wb") as file:
            file.write(html.encode("utf-8"))
        os.replace(tmp, target)
    except BaseException as exc:
        if created:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ReportError(f"cannot write the report to {target}: {exc.strerror or exc}") from exc
        raise
    return target


def write_report_safely(run_dir: str | os.PathLike[str], log: Callable[[str], None] | None = None) -> Path | None:
    """Write ``run_dir/report.html`` at the end of a run; a failure is logged, never raised (the
    run's results are already saved and must not be reported as failed because of a page)."""
    try:
        return write_report([run_dir])
    except Exception as exc:  # noqa: BLE001 - see above
        if log is not None:
            log(f"note: no report.html written ({type(exc).__name__}: {exc}); "
                f"try `llm-envs report {run_dir}`")
        return None
