"""What a fork costs here, by the size of the process that forks: the floor under every
program's process of a sandbox run (issue 35, items 1 and 2).

A process of ``python -I -S`` holding ``--sizes`` MiB of written anonymous memory (an anonymous
mapping, every page touched; with ``--pages huge`` advised as transparent huge pages) forks
``--forks`` children that exit at once (``os._exit``; with ``--touch N`` after writing N pages
spread over it), and waits for each. Side by side in one run: CPython's ``os.fork`` (its at-fork work included) and libc's
``fork`` called through ``ctypes`` (what the by-value run's process uses,
``sandboxes._function_driver._bare_fork``), each size in its own fresh interpreter, sizes
interleaved. The CPU is the parent's and the children's (``getrusage``), per fork; the faults
are the children's minor faults. A sandbox's run process holds ~12 MiB of anonymous memory
(the worker's preload and the driver; ``/proc/<pid>/smaps_rollup`` of a worker's zygote).

    python benchmarks/fork_floor.py                 # 0, 4, 8, 16, 32 MiB, 1000 forks each
    python benchmarks/fork_floor.py --sizes 0 12 --forks 1000
    python benchmarks/fork_floor.py --sizes 12 --pages 4k huge --touch 300   # the zygote's huge pages
    python benchmarks/fork_floor.py --write-faults   # a write after a fork: child against parent

``--write-faults`` measures instead what one write to a page costs after a fork, per page of
``--pages-written`` (2000) written pages of an anonymous mapping: in the child while it shares
the page (a copy-on-write fault: a new page, a copy), and in the parent once the child has
exited (the page is the parent's alone again: a fault that only makes it writable; what the
zygote pays for setting up a job before it forks it), beside a write with no fault at all.

Prints a table and writes benchmarks/results/fork_floor.json (``--write-faults``:
benchmarks/results/fork_floor_write_faults.json).
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
import ctypes, json, mmap, os, resource, sys
size_mib, forks, how, pages, touch = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
# 2 MiB more than asked, so that the aligned 2 MiB stretches inside hold `size_mib` MiB.
ballast = mmap.mmap(-1, (size_mib + 2) << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
if pages == "huge":
    ballast.madvise(mmap.MADV_HUGEPAGE)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1
fork = ctypes.PyDLL(None, use_errno=True).fork if how == "libc" else os.fork
stride = max(1, (len(ballast) >> 12) // touch) if touch else 0
def memory_kib(field):
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
def cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime, r.ru_minflt
self0, _ = cpu(resource.RUSAGE_SELF)
children0, faults0 = cpu(resource.RUSAGE_CHILDREN)
for _ in range(forks):
    pid = fork()
    if pid == 0:
        if touch:
            for page in range(0, len(ballast) >> 12, stride)[:touch]:
                ballast[page << 12] = 2
        os._exit(0)
    os.waitpid(pid, 0)
self1, _ = cpu(resource.RUSAGE_SELF)
children1, faults1 = cpu(resource.RUSAGE_CHILDREN)
print(json.dumps({"anonymous_kib": memory_kib("Anonymous"), "huge_kib": memory_kib("AnonHugePages"),
                  "ms_per_fork": (self1 - self0 + children1 - children0) / forks * 1000,
                  "child_faults": (faults1 - faults0) / forks}))
"""


# One write per page, timed in the child while it shares the pages and in the parent after
# the child exits, `rounds` times; prints microseconds per page (medians).
_WRITE_FAULTS = r"""
import json, mmap, os, statistics, sys, time
pages, rounds = int(sys.argv[1]), int(sys.argv[2])
memory = mmap.mmap(-1, pages << 12, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
def write_all(value):
    start = time.perf_counter()
    for page in range(pages):
        memory[page << 12] = value
    return (time.perf_counter() - start) / pages * 1e6
write_all(1)
no_fault = statistics.median(write_all(2) for _ in range(rounds))
in_child, in_parent = [], []
for _ in range(rounds):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, repr(write_all(3)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    in_child.append(float(os.read(read, 64)))
    os.close(read)
    os.close(write)
    in_parent.append(write_all(4))
print(json.dumps({"no_fault_us": no_fault, "child_copy_us": statistics.median(in_child),
                  "parent_after_exit_us": statistics.median(in_parent)}))
"""


def write_faults(pages: int, rounds: int) -> None:
    out = subprocess.run([sys.executable, "-I", "-S", "-c", _WRITE_FAULTS, str(pages), str(rounds)],
                         capture_output=True, text=True, check=True).stdout
    row = json.loads(out)
    print(f"{'microseconds per written page':<52}{'':>8}")
    print(f"{'no fault (the page is writable)':<52}{row['no_fault_us']:>8.2f}")
    print(f"{'in the child, sharing it (copy-on-write: a copy)':<52}{row['child_copy_us']:>8.2f}")
    print(f"{'in the parent after the child exited (no copy)':<52}{row['parent_after_exit_us']:>8.2f}")
    path = RESULTS.with_name("fork_floor_write_faults.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pages": pages, "rounds": rounds, **row, "load_average_1min": os.getloadavg()[0],
                                "machine": platform.platform(), "cpus": os.cpu_count()}, indent=2))
    print(f"wrote {path}")


def measure(size_mib: int, forks: int, how: str, pages: str = "4k", touch: int = 0) -> dict:
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _CHILD, str(size_mib), str(forks), how, pages, str(touch)],
        capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 4, 8, 16, 32], help="MiB of written ballast")
    parser.add_argument("--forks", type=int, default=1000, help="forks per measurement")
    parser.add_argument("--pages", nargs="+", choices=("4k", "huge"), default=["4k"],
                        help="the ballast in 4 KiB pages, or advised as transparent huge pages (MADV_HUGEPAGE)")
    parser.add_argument("--touch", type=int, default=0, help="pages each child writes before it exits, spread over the ballast")
    parser.add_argument("--write-faults", action="store_true",
                        help="measure one write to a page after a fork, in the child and in the parent")
    parser.add_argument("--pages-written", type=int, default=2000, help="pages written per round (--write-faults)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds (--write-faults)")
    args = parser.parse_args()
    if args.write_faults:
        write_faults(args.pages_written, args.rounds)
        return
    rows = []
    print(f"{'ballast MiB':>12}{'pages':>6}{'anon MiB':>10}{'huge MiB':>10}{'os.fork ms':>12}{'faults':>8}"
          f"{'libc fork ms':>14}{'faults':>8}{'libc/os':>9}")
    for size in args.sizes:
        for pages in args.pages:
            os_fork = measure(size, args.forks, "os", pages, args.touch)
            libc = measure(size, args.forks, "libc", pages, args.touch)
            ratio = libc["ms_per_fork"] / os_fork["ms_per_fork"] if os_fork["ms_per_fork"] > 0 else float("nan")
            rows.append({"ballast_mib": size, "pages": pages, "touch": args.touch, "os_fork": os_fork,
                         "libc_fork": libc, "libc_over_os": ratio})
            print(f"{size:>12}{pages:>6}{libc['anonymous_kib'] / 1024:>10.1f}{libc['huge_kib'] / 1024:>10.1f}"
                  f"{os_fork['ms_per_fork']:>12.3f}{os_fork['child_faults']:>8.0f}{libc['ms_per_fork']:>14.3f}"
                  f"{libc['child_faults']:>8.0f}{ratio:>8.2f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"forks": args.forks, "rows": rows, "load_average_1min": os.getloadavg()[0],
                                   "machine": platform.platform(), "cpus": os.cpu_count()}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
