"""Ray connection and reservations: see :mod:`llm_envs.distributed.cluster` (shared with
``llm-envs eval --ray``)."""

from llm_envs.distributed.cluster import Cluster, RayMissingError, import_ray, node_info

__all__ = ["Cluster", "RayMissingError", "import_ray", "node_info"]
