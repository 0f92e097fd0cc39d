"""Joining (or starting) a Ray cluster, and reserving its resources for a layout.

:class:`Cluster` is the one place that talks to Ray's runtime: it starts a private local
instance or joins the one at ``resources.address``, checks that the cluster has the nodes and
GPUs the layout needs (a clear error instead of actors that wait forever), and makes the
placement groups that gang-schedule GPU actors. It keeps no global state beyond Ray's own: a
cluster it started is shut down by :meth:`Cluster.close`; one it joined is left running.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["Cluster", "RayMissingError", "import_ray", "node_info"]


class RayMissingError(ImportError):
    """Ray is not installed."""


def import_ray() -> Any:
    """``import ray`` with an error that names the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise RayMissingError(
            f"this layout needs Ray ({exc}); install it with: pip install 'llm-envs[ray]'"
        ) from exc
    return ray


def node_info() -> dict[str, str]:
    """Where the calling process runs: Ray node id, IP address and host name."""
    import socket

    ray = import_ray()
    return {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
            "host": socket.gethostname(), "pid": str(os.getpid())}


class Cluster:
    """A connection to Ray for one run.

    Args:
        address: ``None``: start a private local instance (one node; its temporary files under
            a fresh directory). Otherwise a Ray address (``auto``, ``host:port``,
            ``ray://host:port``). When Ray is already initialised in this process (a test's
            fixture, a notebook) that connection is used as it is.
        num_cpus: CPUs of a local instance (default: Ray's count).
        object_store_memory: Bytes of a local instance's object store (default: Ray's).
    """

    def __init__(self, address: str | None = None, num_cpus: float | None = None,
                 object_store_memory: int | None = None) -> None:
        self.ray = import_ray()
        self.owned = False
        self._temp_dir: str | None = None
        self._groups: list[Any] = []
        if not self.ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
            if address is None:
                if num_cpus is not None:
                    kwargs["num_cpus"] = num_cpus
                if object_store_memory is not None:
                    kwargs["object_store_memory"] = object_store_memory
                # a private session directory: never another user's /tmp/ray
                self._temp_dir = kwargs["_temp_dir"] = tempfile.mkdtemp(prefix="llmray-")
            else:
                kwargs["address"] = address
            self.ray.init(**kwargs)
            self.owned = True

    # ------------------------------------------------------------------ what is there
    def nodes(self) -> list[dict[str, Any]]:
        """The alive nodes with their resources."""
        return [n for n in self.ray.nodes() if n.get("Alive")]

    def totals(self) -> dict[str, float]:
        """The cluster's total CPUs and GPUs."""
        res = self.ray.cluster_resources()
        return {"CPU": float(res.get("CPU", 0.0)), "GPU": float(res.get("GPU", 0.0))}

    def check(self, nodes: int, gpus: float, cpus: float) -> None:
        """Raise if the cluster cannot hold a layout of ``nodes`` nodes, ``gpus`` GPUs and
        ``cpus`` reserved CPUs (what :mod:`placement` planned)."""
        have_nodes = len(self.nodes())
        totals = self.totals()
        problems = []
        if have_nodes < nodes:
            problems.append(f"{nodes} nodes planned (resources.nodes), {have_nodes} alive")
        if totals["GPU"] < gpus:
            problems.append(f"{gpus:g} GPUs needed, the cluster has {totals['GPU']:g}")
        if totals["CPU"] < cpus:
            problems.append(f"{cpus:g} CPUs reserved by the layout (resources.cpus_per_*), the cluster has "
                            f"{totals['CPU']:g}")
        if problems:
            raise RuntimeError("the Ray cluster cannot hold this layout: " + "; ".join(problems)
                               + ". Start more nodes (`ray start --address=HEAD:6379` on each) or shrink "
                               "the resources section (see docs/scaling.md).")

    # ------------------------------------------------------------------ reservations
    def placement_group(self, bundles: Sequence[dict[str, float]], strategy: str, name: str,
                        timeout_s: float) -> Any:
        """Reserve ``bundles`` (all or nothing) and wait until Ray has placed them."""
        from ray.util.placement_group import placement_group

        pg = placement_group(list(bundles), strategy=strategy, name=name)
        self._groups.append(pg)
        ready, _ = self.ray.wait([pg.ready()], timeout=timeout_s)
        if not ready:
            raise RuntimeError(
                f"the cluster did not provide {name}'s resources ({len(bundles)} x {dict(bundles[0])}, "
                f"strategy {strategy}) within {timeout_s:g} s; cluster resources now: "
                f"{self.ray.available_resources()}"
            )
        return pg

    def in_group(self, pg: Any, bundle: int) -> Any:
        """The scheduling strategy that puts an actor into bundle ``bundle`` of ``pg``."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        return PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=bundle,
                                                placement_group_capture_child_tasks=True)

    def close(self) -> None:
        """Free the reservations; shut Ray down if this object started it."""
        from ray.util.placement_group import remove_placement_group

        for pg in self._groups:
            try:
                remove_placement_group(pg)
            except Exception:  # noqa: BLE001 - the cluster may already be gone
                pass
        self._groups = []
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
            self.owned = False
        if self._temp_dir is not None:
            import shutil

            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
