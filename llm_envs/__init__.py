"""llm-envs: text-based multi-agent PettingZoo environments for LLM agents.

>>> import llm_envs
>>> env = llm_envs.make("llm/PlanPath-v0")
>>> env.reset(seed=0)

Importing this package registers every environment in PettingZoo's registry under the ``llm``
namespace (and TextArena's games under ``textarena``), so ``pettingzoo.make("aec",
"llm/PlanPath-v0")`` works as well. Any OpenSpiel or TextArena game: :func:`openspiel`,
:func:`textarena`.
"""

from llm_envs import envs as _envs  # noqa: F401  (registers the environments)
from llm_envs.core import ActionRecord, TextEnv, to_chat_messages
from llm_envs.registry import entry, env_ids, list_envs, make, register_env

__version__ = "0.1.0"


def openspiel(game: str, **kwargs):
    """Any OpenSpiel game as a text environment (needs ``open_spiel``: ``llm-envs[games]``).

    ``llm_envs.openspiel("goofspiel(num_cards=4)")``, ``llm_envs.openspiel("kuhn_poker",
    invalid_move="random")``; keyword options are those of
    :class:`~llm_envs.envs.openspiel.env.OpenSpielConfig`.
    """
    from llm_envs.envs.openspiel.env import OpenSpielEnv

    return OpenSpielEnv(game=game, **kwargs)


def remote(url: str, **kwargs):
    """An environment served by ``llm-envs serve`` elsewhere, as a PettingZoo AEC environment.

    ``llm_envs.remote("http://10.0.0.5:8000", size=4)``: keyword options as in :func:`make`
    (sent with every reset), plus ``render_mode`` and ``timeout_s``. Needs ``websockets``
    (``llm-envs[serve]``); see :class:`~llm_envs.interop.remote.RemoteEnv` for what a remote
    environment cannot do (``clone``) and docs/interop.md.
    """
    from llm_envs.interop.remote import RemoteEnv

    return RemoteEnv(url, **kwargs)


def textarena(game: str, **kwargs):
    """Any TextArena game as a text environment (needs ``textarena``: ``llm-envs[games]``).

    ``llm_envs.textarena("Othello-v0")``; keyword options are those of
    :class:`~llm_envs.envs.textarena.env.TextArenaConfig`. The registered ones are also
    ``llm_envs.make("textarena/<id>")``.
    """
    from llm_envs.envs.textarena.env import TextArenaEnv

    return TextArenaEnv(game=game, **kwargs)


__all__ = [
    "ActionRecord",
    "TextEnv",
    "__version__",
    "entry",
    "env_ids",
    "list_envs",
    "make",
    "openspiel",
    "register_env",
    "remote",
    "textarena",
    "to_chat_messages",
]
