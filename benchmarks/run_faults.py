"""Where a sandbox run's page faults are, by the memory they fall in (needs ``perf``).

A fork copies the page-table entries of the zygote's private pages and write-protects them; a
job then pays a fault for each page it writes (a copy) and for each page of code it runs (a
fork copies no entry of a file mapping that holds no private page, so each job maps the
interpreter's code again, 64 KiB per fault). This script records every page fault of one warm
worker's zygote and of its jobs while they serve ``--runs`` runs of a workload (``perf record
-e page-faults -c 1 -d``), sorts each by the zygote's mapping its address falls in, and prints
faults per run for the jobs and for the zygote. No timing: counts, which load does not move.

    python benchmarks/run_faults.py                          # 100 trivial runs on bwrap
    python benchmarks/run_faults.py --workload numpy --backend process

Results: a table, and JSON in ``benchmarks/results/run_faults.json``. It needs ``perf`` and the
right to record other processes (root, or ``kernel.perf_event_paranoid`` <= 1).
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _proc import children_by_parent  # noqa: E402
from _results import write_results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "run_faults.json"
WORKLOADS = {"trivial": "pass\n", "numpy": "import numpy\nprint(numpy.arange(100).sum())\n"}


def _worker_line(sandbox) -> list[int]:
    """The pids from the worker's top process down its line of single children (bwrap, worker,
    zygote; the zygote last), read between runs."""
    (top,) = sandbox.worker_pids()
    children = children_by_parent()
    line = [top]
    while len(children.get(line[-1], ())) == 1:
        line.append(children[line[-1]][0])
    return line


def _kind(perms: str, name: str, fault_page: int, code_page: int) -> str:
    """What a fault's address is, from the zygote's mapping it falls in."""
    if name in ("[heap]", "[stack]"):
        return name[1:-1]
    if not name.startswith("/"):
        return "anonymous (object arenas, other mmaps)" if perms.startswith("rw") else f"other ({name or perms})"
    library = name.rsplit("/", 1)[-1]
    library = "libpython" if library.startswith("libpython") else "other files"
    if "x" in perms:
        return f"code: {library}" + (" (instruction fetch)" if fault_page == code_page else " (data read)")
    if "w" in perms:
        return f"writable data: {library}"
    return f"read-only data: {library}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="trivial")
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    if shutil.which("perf") is None:
        sys.exit("run_faults.py needs perf (linux-perf / linux-tools)")
    import sandboxes

    preload = ["numpy"] if args.workload == "numpy" else []
    sandbox = sandboxes.make_sandbox(args.backend, pool_size=1, **({"preload": preload} if preload else {}))
    program = WORKLOADS[args.workload]
    with tempfile.TemporaryDirectory() as scratch:
        data = os.path.join(scratch, "faults.data")
        try:
            for _ in range(20):
                assert sandbox.run(program).ok
            line = _worker_line(sandbox)
            if len(line) < 2:
                sys.exit("could not find the worker's zygote")
            worker, zygote = line[-2], line[-1]
            recorder = subprocess.Popen(
                ["perf", "record", "-e", "page-faults", "-c", "1", "-d", "-o", data, "-p", f"{worker},{zygote}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            time.sleep(1.0)  # perf attaches
            for _ in range(args.runs):
                assert sandbox.run(program).ok
            time.sleep(0.2)
            recorder.send_signal(2)
            _, err = recorder.communicate(timeout=60)
            maps = []
            for entry in Path(f"/proc/{zygote}/maps").read_text().splitlines():
                fields = entry.split()
                low, high = (int(v, 16) for v in fields[0].split("-"))
                maps.append((low, high, fields[1], fields[5] if len(fields) > 5 else ""))
        finally:
            sandbox.close()
        if recorder.returncode not in (0, -2) or not os.path.exists(data):
            sys.exit(f"perf record failed: {err.decode(errors='replace').strip()[-400:]}")
        script = subprocess.run(
            ["perf", "script", "-i", data, "-F", "pid,addr,ip"], capture_output=True, text=True, check=True
        ).stdout
    counts: dict[str, collections.Counter] = {"job": collections.Counter(), "zygote": collections.Counter()}
    jobs: set[int] = set()
    for entry in script.splitlines():
        match = re.match(r"\s*(\d+)\s+([0-9a-f]+)\s+([0-9a-f]+)", entry)
        if not match:
            continue
        pid, address, ip = int(match.group(1)), int(match.group(2), 16), int(match.group(3), 16)
        if pid == worker:
            continue  # the worker does not fork per run; its faults are not the fork's
        who = "zygote" if pid == zygote else "job"
        if who == "job":
            jobs.add(pid)
        kind = next((_kind(p, n, address >> 12, ip >> 12) for lo, hi, p, n in maps if lo <= address < hi), "outside the zygote's mappings")
        counts[who][kind] += 1
    runs = max(1, len(jobs))
    kinds = sorted(set(counts["job"]) | set(counts["zygote"]), key=lambda k: -(counts["job"][k] + counts["zygote"][k]))
    rows = [
        {"memory": kind, "job_faults_per_run": counts["job"][kind] / runs, "zygote_faults_per_run": counts["zygote"][kind] / runs}
        for kind in kinds
    ]
    print(f"{args.workload} on {args.backend}: {len(jobs)} jobs recorded; page faults per run, by the zygote's mapping")
    print(f"{'memory':48s} {'job':>8s} {'zygote':>8s}")
    for row in rows:
        print(f"{row['memory']:48s} {row['job_faults_per_run']:8.1f} {row['zygote_faults_per_run']:8.1f}")
    job_total = sum(counts["job"].values()) / runs
    zygote_total = sum(counts["zygote"].values()) / runs
    print(f"{'total':48s} {job_total:8.1f} {zygote_total:8.1f}")
    write_results(
        RESULTS,
        {
            "backend": args.backend,
            "workload": args.workload,
            "jobs": len(jobs),
            "rows": rows,
            "job_total": job_total,
            "zygote_total": zygote_total,
            "kernel": platform.release(),
        },
    )

if __name__ == "__main__":
    main()
