"""Any registered environment as an OpenEnv-compatible server (``llm-envs serve ENV_ID``).

The server is built on ``openenv-core`` (the ``serve`` extra: ``pip install 'llm-envs[serve]'``),
so OpenEnv's own clients (``GenericEnvClient``, ``EnvClient`` subclasses, their ``.sync()``
wrappers) talk to it unchanged; :func:`llm_envs.remote` is the PettingZoo side of the same
protocol. Nothing here imports ``openenv`` until a server is built, so ``llm_envs`` still imports
without it.

==========================  ===================================================================
:mod:`.protocol`            the wire format: action, observation and state fields, error codes
                            (plain Python; the client uses it without openenv-core)
:mod:`.session`             one environment instance per WebSocket session (an OpenEnv
                            ``Environment``)
:mod:`.app`                 the FastAPI app (OpenEnv's ``HTTPEnvServer`` routes, plus the
                            message-size guard and ``/info``) and :func:`serve`
==========================  ===================================================================

See docs/interop.md ("OpenEnv server and client") for the protocol and the commands.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "serve"]


def create_app(*args: Any, **kwargs: Any) -> Any:
    """:func:`llm_envs.serve.app.create_app` (imports openenv-core)."""
    from .app import create_app as _create_app

    return _create_app(*args, **kwargs)


def serve(*args: Any, **kwargs: Any) -> None:
    """:func:`llm_envs.serve.app.serve` (imports openenv-core and uvicorn)."""
    from .app import serve as _serve

    _serve(*args, **kwargs)
