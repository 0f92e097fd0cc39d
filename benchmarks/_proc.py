"""One place for what the sandbox benchmarks read from ``/proc``: the process tree of a
sandbox's workers and the CPU its processes have used."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def children_by_parent() -> dict[int, list[int]]:
    """Every live process's pid under its parent's pid, read from ``/proc`` now."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue  # gone meanwhile
            children.setdefault(int(stat[stat.rfind(b")") + 2 :].split()[1]), []).append(int(name))
    return children


def process_tree(tops: Iterable[int]) -> list[int]:
    """`tops` and every live descendant of theirs."""
    children = children_by_parent()
    pids, frontier = [], list(tops)
    while frontier:
        pid = frontier.pop()
        pids.append(pid)
        frontier.extend(children.get(pid, ()))
    return pids


def cpu_seconds(pids: Iterable[int]) -> float:
    """User and system CPU seconds of `pids`, each with what its reaped children used (so that
    every CPU second of a tree whose processes are reaped inside it counts once)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICK
