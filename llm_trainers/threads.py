"""How many intra-op threads torch should use on a CPU: the CPUs this process may actually run on.

torch's own default is the machine's core count as the OpenMP runtime sees it, which ignores a
container's CPU quota: a process allowed 2 CPUs on a 64-core host starts 64 spinning threads.
On a loaded 2-core machine an 8 × 32-token ``generate`` of a 135M model took 392 s with torch's
default threads and 28 s with one thread (issue 23), so both ``llm-envs eval`` (``--threads``)
and ``llm-train`` (``run.threads``) set the count explicitly:

* an explicit value wins;
* else ``OMP_NUM_THREADS`` when it is set to a positive integer (the user already chose);
* else :func:`usable_cpus`: the CPUs in this process's affinity mask, capped by the cgroup CPU
  quota (cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us / cpu.cfs_period_us``), rounded down,
  at least 1.

On a machine shared with other busy processes, one thread per process is usually fastest
(threads that wait for a busy core spin); pass ``--threads 1`` / ``run.threads=1`` there.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["cgroup_cpu_limit", "resolve_threads", "set_torch_threads", "usable_cpus"]

_CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_cpu_limit(root: Path = _CGROUP_ROOT) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (``quota / period``), or None if unlimited
    or unknown. Reads cgroup v2 ``cpu.max`` (``"max 100000"`` or ``"200000 100000"``) and falls
    back to cgroup v1's ``cpu/cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` (quota -1: none)."""
    try:
        quota, _, period = (root / "cpu.max").read_text().strip().partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        if quota == "max":
            return None
    except (OSError, ValueError):
        pass
    for v1 in (root / "cpu", root / "cpu,cpuacct", root):
        try:
            quota_us = int((v1 / "cpu.cfs_quota_us").read_text())
            period_us = int((v1 / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    return None


def usable_cpus(root: Path = _CGROUP_ROOT) -> int:
    """The CPUs this process may use: its affinity mask, capped by the cgroup quota (≥ 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit(root)
    if limit is not None:
        cpus = min(cpus, math.floor(limit))
    return max(1, cpus)


def resolve_threads(threads: int | None = None, environ: dict[str, str] | None = None) -> int:
    """The intra-op thread count to use: ``threads`` if given (≥ 1), else a positive
    ``OMP_NUM_THREADS``, else :func:`usable_cpus`."""
    if threads is not None:
        if int(threads) < 1:
            raise ValueError(f"threads must be >= 1 (or unset for the CPUs this process may use), got {threads}")
        return int(threads)
    env = os.environ if environ is None else environ
    try:
        omp = int(env.get("OMP_NUM_THREADS", ""))
    except ValueError:
        omp = 0
    return omp if omp > 0 else usable_cpus()


def set_torch_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads to :func:`resolve_threads` ``(threads)``; return the count."""
    import torch

    n = resolve_threads(threads)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
