"""Use the text environments from other MARL code: parallel API and numeric views.

>>> import llm_envs
>>> from llm_envs.interop import NumericView, parallel_env
>>> par = parallel_env("llm/Debate-v0")                                 # PettingZoo ParallelEnv
>>> num = NumericView(llm_envs.make("llm/Signalling-v0"))               # arrays + Discrete moves
>>> grid = NumericView(llm_envs.make("llm/PlanPath-v0", agents="single"), observation="state")
>>> num_par = parallel_env(NumericView(llm_envs.make("llm/Debate-v0"), actions="text"))

Importing this package also registers every environment in PettingZoo's *parallel* registry, so
``pettingzoo.make("parallel", "llm/Debate-v0")`` returns :func:`parallel_env`'s form.

Nothing here imports torch or any MARL library; ``examples/`` shows Tianshou, TorchRL, RLlib and
SuperSuit on top, and ``docs/interop.md`` says what works with which.
"""

from __future__ import annotations

import functools

from pettingzoo.env_registry.registration import parallel_registry
from pettingzoo.env_registry.registration import register as _pz_register

from llm_envs.interop import fallback_moves  # noqa: F401  (registers the wrapper-side move lists)
from llm_envs.interop.encoding import (
    ByteEncoder,
    CharEncoder,
    TextEncoder,
    TokenizerEncoder,
    encode_fixed,
    encode_head_and_tail,
)
from llm_envs.interop.hooks import (
    ActionCatalog,
    Catalog,
    LegalActions,
    MoveSet,
    StateTensor,
    candidate_actions,
    find_catalog,
    find_moves,
    has_state_tensor,
    is_simultaneous,
    register_moves,
)
from llm_envs.interop.numeric import ACTION_MODES, KEEP_MODES, OBSERVATION_MODES, NumericView, default_text
from llm_envs.interop.parallel import (
    ParallelOrderError,
    SimultaneousParallelEnv,
    TurnBasedParallelEnv,
    parallel_env,
)

__all__ = [
    "ACTION_MODES",
    "ActionCatalog",
    "ByteEncoder",
    "Catalog",
    "CharEncoder",
    "KEEP_MODES",
    "LegalActions",
    "MoveSet",
    "NumericView",
    "OBSERVATION_MODES",
    "ParallelOrderError",
    "SimultaneousParallelEnv",
    "StateTensor",
    "TextEncoder",
    "TokenizerEncoder",
    "TurnBasedParallelEnv",
    "candidate_actions",
    "default_text",
    "encode_fixed",
    "encode_head_and_tail",
    "find_catalog",
    "find_moves",
    "has_state_tensor",
    "is_simultaneous",
    "parallel_env",
    "register_moves",
    "register_parallel_envs",
]


def register_parallel_envs() -> list[str]:
    """Register :func:`parallel_env` for every text environment in PettingZoo's parallel
    registry (ids already there are left alone). Returns the ids registered now."""
    from llm_envs.registry import env_ids

    added = []
    for env_id in env_ids():
        if env_id not in parallel_registry:
            _pz_register("parallel", env_id, entry_point=functools.partial(parallel_env, env_id))
            added.append(env_id)
    return added


register_parallel_envs()
