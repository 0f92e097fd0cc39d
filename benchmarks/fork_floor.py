"""What a fork costs here, by the size of the process that forks: the floor under every
program's process of a sandbox run (issue 35, items 1 and 2).

A process of ``python -I -S`` holding ``--sizes`` MiB of written anonymous memory (a bytearray,
every page touched) forks ``--forks`` children that exit at once (``os._exit``), and waits for
each. Side by side in one run: CPython's ``os.fork`` (its at-fork work included) and libc's
``fork`` called through ``ctypes`` (what the by-value run's process uses,
``sandboxes._function_driver._bare_fork``), each size in its own fresh interpreter, sizes
interleaved. The CPU is the parent's and the children's (``getrusage``), per fork; the faults
are the children's minor faults. A sandbox's run process holds ~12 MiB of anonymous memory
(the worker's preload and the driver; ``/proc/<pid>/smaps_rollup`` of a worker's zygote).

    python benchmarks/fork_floor.py                 # 0, 4, 8, 16, 32 MiB, 1000 forks each
    python benchmarks/fork_floor.py --sizes 0 12 --forks 1000

Prints a table and writes benchmarks/results/fork_floor.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "fork_floor.json"

# Run in a fresh `python -I -S` per measurement: nothing of this script's own imports is held.
_CHILD = r"""
import ctypes, json, os, resource, sys
size_mib, forks, how = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ballast = bytearray(size_mib << 20)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1
fork = ctypes.PyDLL(None, use_errno=True).fork if how == "libc" else os.fork
def anonymous_kib():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1])
def cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime, r.ru_minflt
self0, _ = cpu(resource.RUSAGE_SELF)
children0, faults0 = cpu(resource.RUSAGE_CHILDREN)
for _ in range(forks):
    pid = fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
self1, _ = cpu(resource.RUSAGE_SELF)
children1, faults1 = cpu(resource.RUSAGE_CHILDREN)
print(json.dumps({"anonymous_kib": anonymous_kib(),
                  "ms_per_fork": (self1 - self0 + children1 - children0) / forks * 1000,
                  "child_faults": (faults1 - faults0) / forks}))
"""


def measure(size_mib: int, forks: int, how: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _CHILD, str(size_mib), str(forks), how],
        capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 4, 8, 16, 32], help="MiB of written ballast")
    parser.add_argument("--forks", type=int, default=1000, help="forks per measurement")
    args = parser.parse_args()
    rows = []
    print(f"{'ballast MiB':>12}{'anon MiB':>10}{'os.fork ms':>12}{'faults':>8}{'libc fork ms':>14}{'faults':>8}"
          f"{'libc/os':>9}")
    for size in args.sizes:
        os_fork = measure(size, args.forks, "os")
        libc = measure(size, args.forks, "libc")
        ratio = libc["ms_per_fork"] / os_fork["ms_per_fork"] if os_fork["ms_per_fork"] > 0 else float("nan")
        rows.append({"ballast_mib": size, "os_fork": os_fork, "libc_fork": libc, "libc_over_os": ratio})
        print(f"{size:>12}{libc['anonymous_kib'] / 1024:>10.1f}{os_fork['ms_per_fork']:>12.3f}"
              f"{os_fork['child_faults']:>8.0f}{libc['ms_per_fork']:>14.3f}{libc['child_faults']:>8.0f}{ratio:>8.2f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"forks": args.forks, "rows": rows, "load_average_1min": os.getloadavg()[0],
                                   "machine": platform.platform(), "cpus": os.cpu_count()}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
