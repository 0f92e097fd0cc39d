"""How fast a report is written and opens, as the number of episodes grows.

Real PlanPath episodes (random agents: long, failing, multi-turn episodes with programs and
sandbox output) are played once, then copied with new indices and seeds into evaluation runs of
100, 1,000 and 5,000 episodes (``--quick``: 100 and 1,000). For each run, side by side:

* **write**: seconds for ``llm-envs report`` to read the run and write the page; its size
  next to the size of ``episodes.jsonl``;
* **open** (headless Chromium, a fresh page each time, median of ``--repeats``): milliseconds
  from navigation to the page being ready (list drawn, script done: ``performance.mark
  ("report-ready")``), and to the ``load`` event;
* **episode**: milliseconds from a click on a row to its conversation on screen (unpacked and
  drawn); **search**: the first text search over every episode (unpacks them all); **filter**:
  an outcome filter on the whole list.

The target: a 1,000-episode run opens in under two seconds. Without Chromium and Playwright
(see docs/report.md) only the write columns are measured.

Outputs: a table on screen and ``benchmarks/results/report_render.json`` (and ``.md``).

    python benchmarks/report_render.py            # 100, 1000, 5000 episodes, 5 repeats
    python benchmarks/report_render.py --quick    # 100, 1000 episodes, 3 repeats
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def play_source(directory: Path, episodes: int) -> Path:
    from llm_envs.agents import RandomAgent
    from llm_envs.evaluation import evaluate

    evaluate("llm/PlanPath-v0", RandomAgent(), episodes=episodes, seed=0, concurrency=4, out_dir=directory,
             progress=False, plot=False, overwrite=True)
    return directory / "episodes.jsonl"


def make_run(directory: Path, source: list[dict[str, Any]], episodes: int) -> Path:
    """An evaluation run of ``episodes`` episodes copied from ``source`` (new indices and seeds)."""
    from llm_envs.episodes import EpisodeResult
    from llm_envs.evaluation.summary import summarize

    directory.mkdir(parents=True, exist_ok=True)
    lines, results = [], []
    for i in range(episodes):
        data = dict(source[i % len(source)])
        data.update(index=i, seed=i, episode_id=f"{data['episode_id']}-copy{i}")
        lines.append(json.dumps(data, ensure_ascii=False))
        results.append(EpisodeResult.from_dict(data))
    (directory / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    (directory / "summary.json").write_text(json.dumps(summarize(results, extra={"seed": 0})))
    return directory


def measure_in_browser(context: Any, html: Path, repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"ready_ms": [], "load_ms": [], "episode_ms": [], "search_ms": [], "filter_ms": []}
    errors: list[str] = []
    for _ in range(repeats):
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(html.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=60_000)
        times["ready_ms"].append(page.evaluate("performance.getEntriesByName('report-ready')[0].startTime"))
        times["load_ms"].append(page.evaluate(
            "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()"))
        times["episode_ms"].append(page.evaluate("""async () => {
            const t0 = performance.now();
            document.querySelector('.episode-list tbody tr:nth-child(3)').click();
            while (!document.querySelector('article.episode')) await new Promise(r => setTimeout(r, 1));
            return performance.now() - t0; }"""))
        times["filter_ms"].append(page.evaluate("""async () => {
            const t0 = performance.now();
            const select = document.querySelector('.f-outcome');
            select.value = 'failed'; select.dispatchEvent(new Event('change'));
            await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
            const t = performance.now() - t0;
            select.value = ''; select.dispatchEvent(new Event('change'));
            return t; }"""))
        times["search_ms"].append(page.evaluate("""async () => {
            const root = document.querySelector('.episodes'), input = root.querySelector('.f-text');
            const t0 = performance.now();
            input.value = 'print('; input.dispatchEvent(new Event('input'));
            while (!root.querySelector('.count').textContent.includes(' of ')
                   || root.querySelector('.count').textContent.startsWith('searching')) await new Promise(r => setTimeout(r, 2));
            return performance.now() - t0; }"""))
        page.close()
        if errors:
            raise SystemExit(f"the page failed: {errors}")
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 and 1000 episodes, 3 repeats")
    parser.add_argument("--sizes", type=int, nargs="+", help="episode counts (default 100 1000 5000)")
    parser.add_argument("--source-episodes", type=int, default=40, help="real episodes played and copied")
    parser.add_argument("--repeats", type=int, help="page opens per size (default 5; --quick 3)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "report_render.json")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([100, 1000] if args.quick else [100, 1000, 5000])
    repeats = args.repeats or (3 if args.quick else 5)

    from llm_envs.report import write_report
    from llm_envs.report.browser import open_browser, unavailable_reason

    reason = unavailable_reason()
    if reason:
        print(f"no browser measurements: {reason}", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        base = Path(tmp)
        started = time.perf_counter()
        source_file = play_source(base / "source", args.source_episodes)
        source = [json.loads(line) for line in source_file.read_text().splitlines()]
        print(f"played {len(source)} PlanPath episodes with random agents in {time.perf_counter() - started:.1f} s "
              f"(mean {source_file.stat().st_size / len(source) / 1024:.1f} kB per episode)", file=sys.stderr)
        browser = open_browser() if reason is None else None
        context = browser.__enter__() if browser is not None else None
        try:
            for size in sizes:
                run = make_run(base / f"run{size}", source, size)
                t0 = time.perf_counter()
                html = write_report([run])
                write_s = time.perf_counter() - t0
                row = {"episodes": size, "write_s": write_s,
                       "episodes_jsonl_mb": (run / "episodes.jsonl").stat().st_size / 2**20,
                       "report_mb": html.stat().st_size / 2**20}
                if context is not None:
                    row.update(measure_in_browser(context, html, repeats))
                rows.append(row)
                print(f"  {size} episodes: done", file=sys.stderr)
        finally:
            if browser is not None:
                browser.__exit__(None, None, None)

    base_row = rows[0]
    header = ["episodes", "write s", "jsonl MB", "report MB", "ready ms", "load ms", "open episode ms",
              "first search ms", "filter ms", "ready / smallest"]
    lines = []
    for row in rows:
        ratio = f"{row['ready_ms'] / base_row['ready_ms']:.2f}x" if "ready_ms" in row else "-"
        cells = [str(row["episodes"]), f"{row['write_s']:.2f}", f"{row['episodes_jsonl_mb']:.1f}",
                 f"{row['report_mb']:.1f}"]
        cells += [f"{row[k]:.0f}" if k in row else "-" for k in ("ready_ms", "load_ms", "episode_ms", "search_ms",
                                                                  "filter_ms")]
        lines.append(cells + [ratio])
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    table = "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in [header, *lines])
    print(table)
    report = {
        "benchmark": "report_render",
        "source": f"{len(source)} real PlanPath episodes (random agents), copied",
        "repeats": repeats,
        "browser": None if reason else "headless Chromium (Playwright, executable_path)",
        "python": platform.python_version(),
        "machine": platform.platform(),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    md = "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
    md += "".join("| " + " | ".join(line) + " |\n" for line in lines)
    args.out.with_suffix(".md").write_text(md)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
