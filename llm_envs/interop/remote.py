"""A PettingZoo AEC environment played on an ``llm-envs serve`` server: :func:`llm_envs.remote`.

>>> env = llm_envs.remote("http://127.0.0.1:8000", size=4)   # keyword options as in make()
>>> env.reset(seed=0)
>>> for agent in env.agent_iter():
...     observation, reward, terminated, truncated, info = env.last()
...     env.step(None if terminated or truncated else my_llm(observation))
>>> env.records, env.transcript(), env.episode_metrics()

It speaks the server's OpenEnv WebSocket protocol (:mod:`llm_envs.serve.protocol`) over one
connection (one server-side session) with the ``websockets`` package (the ``serve`` extra).
A remote environment does what a local one does except ``clone()`` (the protocol cannot copy a
session), ``reference_action`` (only with ``--expose-reference``) and well-formed
``random_action`` (generic random text): docs/interop.md ("Remote environments").

Failures are exceptions, never made-up observations: :class:`RemoteEnvError` (a refused
message: nothing changed), :class:`RemoteInfrastructureError` (a sandbox failure on the
server) and :class:`RemoteConnectionError` (the connection lost mid-episode); the latter two are
:class:`~llm_envs.core.errors.InfrastructureError`, so runners record the episode as incomplete
and trainers drop it; the next ``reset()`` reconnects.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, NoReturn

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from llm_envs.core.env import render_transcript
from llm_envs.core.errors import InfrastructureError
from llm_envs.core.records import ActionRecord
from llm_envs.core.spaces import action_space, observation_space
from llm_envs.serve.protocol import INFRASTRUCTURE_PREFIX

__all__ = ["RemoteConnectionError", "RemoteEnv", "RemoteEnvError", "RemoteInfrastructureError", "remote"]


class RemoteEnvError(RuntimeError):
    """The server refused a message (wrong agent, unknown option, ...): nothing changed."""


class RemoteInfrastructureError(InfrastructureError):
    """The server could not judge the step (its sandbox failed): the episode is unchanged."""


class RemoteConnectionError(InfrastructureError):
    """The connection to the server is gone (server killed, stopped, restarted, unreachable):
    the episode is lost; ``reset()`` reconnects and starts a new one."""


class RemoteEnv(AECEnv[str, dict[str, str], str]):
    """One session on an ``llm-envs serve`` server, as a PettingZoo AEC environment.

    Args:
        url: The server's base URL (``http://host:port`` or ``ws://host:port``).
        render_mode: ``"ansi"`` (``render()`` returns the transcript), ``"human"`` or None.
        timeout_s: Seconds to wait for the connection and for each reply.
        **env_options: Keyword options of ``llm_envs.make``, sent with every reset (the server
            refuses unknown ones).
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "remote_text_env_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
        "render_fps": 1,
    }

    def __init__(self, url: str, *, render_mode: str | None = None, timeout_s: float = 60.0, **env_options: Any):
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not supported; choose one of {self.metadata['render_modes']} or None")
        base = url.rstrip("/")
        if base.startswith("http://") or base.startswith("https://"):
            base = "ws" + base[len("http"):]
        elif not (base.startswith("ws://") or base.startswith("wss://")):
            raise ValueError(f"the server URL must start with http://, https://, ws:// or wss://: {url!r}")
        self.url = url
        self.ws_url = base + "/ws"
        self.render_mode = render_mode
        self.timeout_s = timeout_s
        self.env_options = dict(env_options)
        self._ws: Any = None
        info = self._info()
        self.env_id = info["env_id"]
        self.metadata = {**self.metadata, "name": self.env_id}
        self.possible_agents = list(info["possible_agents"])
        self.observation_spaces = {a: observation_space() for a in self.possible_agents}
        self.action_spaces = {a: action_space() for a in self.possible_agents}
        self.reference_exposed = bool(info.get("expose_reference"))
        self._frame: dict[str, Any] = {}
        self._state: dict[str, Any] | None = None
        self._has_reset = False
        self.turn = 0
        self.episode_id = ""

    # ------------------------------------------------------------------ AEC API
    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if self._ws is None:
            self._connect()
        data: dict[str, Any] = dict(self.env_options)
        if seed is not None:
            data["seed"] = int(seed)
        if options:
            data["options"] = dict(options)
        self._apply(self._request({"type": "reset", "data": data}), reset=True)
        self._has_reset = True

    def step(self, action: str | None) -> None:
        self._require_reset()
        if not self.agents:
            raise RemoteEnvError("the episode is over (no agents left); call reset()")
        agent = self.agent_selection
        dead = self.terminations[agent] or self.truncations[agent]
        if dead:
            if action is not None:
                raise ValueError("when an agent is dead, the only valid action is None")
        else:
            if action is None:
                action = ""
            if not isinstance(action, str):
                raise TypeError(f"actions are text: expected str, got {type(action).__name__}")
        self._apply(self._request({"type": "step", "data": {"agent": agent, "text": action}}))

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """PettingZoo's ``last``; before ``reset``, a :class:`RemoteEnvError` (not an
        ``AttributeError``)."""
        self._require_reset()
        return super().last(observe)

    def agent_iter(self, max_iter: int = 2**63) -> Any:
        """PettingZoo's ``agent_iter``; before ``reset``, a :class:`RemoteEnvError`."""
        self._require_reset()
        return super().agent_iter(max_iter)

    def observe(self, agent: str) -> dict[str, str]:
        self._require_reset()
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        frame = self._frame
        if agent == frame.get("agent"):
            return {"instruction": frame["instruction"], "prompt": frame["prompt"]}
        return dict(self.state()["observations"][agent])

    def render(self) -> str | None:
        return render_transcript(self)

    def close(self) -> None:
        if self._ws is not None:
            try:
                self._ws.send(json.dumps({"type": "close"}))
            except Exception:
                pass  # the server may be gone already
            try:
                self._ws.close()
            except Exception:
                pass
            self._ws = None

    # ------------------------------------------------------------------ TextEnv conveniences
    def state(self) -> dict[str, Any]:
        """The server's state of the episode (transcript, records, every observation); cached
        until the next reset or step."""
        self._require_reset()
        if self._state is None:
            reply = self._request({"type": "state"})
            state = reply.get("data")
            shapes = {"observations": dict, "records": list, "transcript": str, "agent_rewards": dict}
            if reply.get("type") != "state" or not isinstance(state, dict) or not all(
                isinstance(state.get(key), kind) for key, kind in shapes.items()
            ):
                self._malformed(f"a state frame without {', '.join(shapes)} ({str(reply)[:80]!r})")
            self._state = state
        return self._state

    @property
    def records(self) -> Sequence[ActionRecord]:
        """The episode's records; their number is known without asking the server (runners
        count records after every step), their content is fetched on first use."""
        return _RemoteRecords(self) if self._has_reset else []

    @property
    def episode_over(self) -> bool:
        return bool(self._frame.get("done"))

    def transcript(self, prompts: bool = False) -> str:
        """The server's transcript (``prompts=True`` is not served: the plain transcript)."""
        return self.state()["transcript"]

    def episode_metrics(self) -> dict[str, float]:
        metrics = self.state()["metrics"]
        return dict(metrics) if metrics else {"success": 0.0, "turns": float(self.turn)}

    def agent_rewards(self) -> dict[str, float]:
        return dict(self.state()["agent_rewards"])

    def role_of(self, agent: str) -> str:
        info = self.infos.get(agent) if self._has_reset else None
        return str(info.get("role", agent)) if info else agent

    def reference_action(self, agent: str) -> str:
        state = self.state()
        if not self.reference_exposed:
            raise NotImplementedError(
                f"the server at {self.url} does not expose reference actions (start it with --expose-reference)"
            )
        if agent != state["agent_selection"] or state["reference_action"] is None:
            raise NotImplementedError(f"the server has a reference action only for the agent to act now ({state['agent_selection']!r})")
        return state["reference_action"]

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        length = int(rng.integers(0, 64))
        alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 \n"))
        return "".join(rng.choice(alphabet, size=length))

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"a remote environment keeps no cross-episode state here: got {sorted(state)}")

    # ------------------------------------------------------------------ transport
    def _info(self) -> dict[str, Any]:
        import httpx

        http = "http" + self.ws_url[len("ws"):-len("/ws")]
        try:
            response = httpx.get(f"{http}/info", timeout=self.timeout_s)
            response.raise_for_status()
            return response.json()
        except httpx.HTTPError as exc:
            raise RemoteConnectionError(f"no llm-envs server at {self.url}: {exc}") from exc

    def _connect(self) -> None:
        try:
            from websockets.sync.client import connect
        except ImportError as exc:  # pragma: no cover - the serve extra
            raise ImportError("llm_envs.remote needs the websockets package: pip install 'llm-envs[serve]'") from exc
        try:
            # Entered as a context manager (websockets 17 warns otherwise); close() leaves it.
            self._ws = connect(self.ws_url, open_timeout=self.timeout_s, max_size=None).__enter__()
        except Exception as exc:
            raise RemoteConnectionError(f"cannot connect to {self.ws_url}: {exc}") from exc

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise RemoteConnectionError(f"not connected to {self.url}: the connection was lost; call reset()")
        try:
            self._ws.send(json.dumps(message))
            text = self._ws.recv(timeout=self.timeout_s)
        except (ConnectionClosed, OSError, TimeoutError) as exc:
            self._lost(exc, self._parting_error())
        try:
            reply = json.loads(text)
        except (ValueError, TypeError) as exc:  # a proxy's error page, a binary frame
            self._malformed(f"a frame that is not JSON ({str(text)[:80]!r})", exc)
        if not isinstance(reply, dict) or not isinstance(reply.get("data", {}), dict):
            self._malformed(f"a frame that is not an object with an object of data ({str(text)[:80]!r})")
        if reply.get("type") == "error":
            data = reply.get("data", {})
            text = f"{data.get('message', 'unknown error')} (code {data.get('code', '?')})"
            if data.get("errors"):
                text += f": {data['errors']}"
            if str(data.get("message", "")).startswith(INFRASTRUCTURE_PREFIX):
                raise RemoteInfrastructureError(f"server {self.url}: {text}")
            if data.get("code") == "CAPACITY_REACHED":  # the server closes the connection too
                self._lost(ConnectionError(text), text)
            raise RemoteEnvError(f"server {self.url}: {text}")
        return reply

    def _parting_error(self) -> str | None:
        """The error frame a server sent before closing the connection, if one is waiting: OpenEnv
        refuses a session beyond ``--max-sessions`` that way (``CAPACITY_REACHED``), and the send
        that follows fails as if the connection had been lost."""
        try:
            data = json.loads(self._ws.recv(timeout=0)) if self._ws is not None else None
        except Exception:
            return None
        if not isinstance(data, dict) or data.get("type") != "error":
            return None
        error = data.get("data") or {}
        return f"{error.get('message', 'unknown error')} (code {error.get('code', '?')})"

    def _lost(self, exc: Exception, server_error: str | None = None) -> None:
        ws, self._ws = self._ws, None
        try:
            ws.close()
        except Exception:
            pass
        self._has_reset = False
        if server_error is not None:
            hint = (
                "; start the server with a larger --max-sessions, or open fewer environment instances"
                if "CAPACITY_REACHED" in server_error else ""
            )
            raise RemoteConnectionError(
                f"the server {self.url} closed the connection: {server_error}{hint}"
            ) from exc
        raise RemoteConnectionError(
            f"the connection to {self.url} was lost mid-episode ({type(exc).__name__}: {exc}); the episode is "
            "lost: reset() reconnects and starts a new one"
        ) from exc

    def _malformed(self, what: str, exc: Exception | None = None) -> NoReturn:
        """The server answered with ``what``: nothing of the episode can be trusted any more
        (a protocol mismatch, a proxy in the way), so the connection is dropped and the episode
        lost, as when the connection is lost (:class:`RemoteConnectionError`)."""
        ws, self._ws = self._ws, None
        try:
            if ws is not None:
                ws.close()
        except Exception:
            pass
        self._has_reset = False
        raise RemoteConnectionError(
            f"the server {self.url} sent {what}; the episode is lost: reset() reconnects and starts a new one"
        ) from exc

    def _apply(self, reply: dict[str, Any], reset: bool = False) -> None:
        """Mirror the server's AEC state from an observation frame, checked first: a frame that
        does not hold a consistent AEC state (an agent the environment does not have, a flag
        or reward missing for a live agent, a reward that is not a finite number) is refused
        (:meth:`_malformed`), never copied in. A reset's frame names the session's possible
        agents (options such as ``num_agents`` change them from the server's ``/info``)."""
        possible = self.possible_agents
        if reset:
            observation = (reply.get("data") or {}).get("observation") if isinstance(reply.get("data"), dict) else None
            named = observation.get("possible_agents") if isinstance(observation, dict) else None
            if isinstance(named, list) and named and all(isinstance(a, str) for a in named) and len(set(named)) == len(named):
                possible = list(named)
        problem = _frame_problem(reply, possible)
        if problem is not None:
            self._malformed(f"an observation frame that is not a consistent AEC state ({problem})")
        if possible != self.possible_agents:
            self.possible_agents = possible
            self.observation_spaces = {a: observation_space() for a in possible}
            self.action_spaces = {a: action_space() for a in possible}
        payload = reply["data"]
        frame = dict(payload["observation"])
        frame["done"], frame["reward"] = payload.get("done", False), payload.get("reward")
        self._frame, self._state = frame, None
        self.agents = list(frame["agents"])
        if frame["agent"]:
            self.agent_selection = frame["agent"]
        self.rewards = {a: float(r) for a, r in frame["rewards"].items()}
        self._cumulative_rewards = {a: float(r) for a, r in frame["cumulative_rewards"].items()}
        self.terminations = dict(frame["terminations"])
        self.truncations = dict(frame["truncations"])
        self.infos = {a: dict(i) for a, i in frame["infos"].items()}
        self.turn = int(frame["turn"])
        self.episode_id = frame["episode_id"]

    def _require_reset(self) -> None:
        if not self._has_reset:
            raise RemoteEnvError("call reset() first (a new connection, or the last one was lost)")


def _frame_problem(reply: Any, possible_agents: Sequence[str]) -> str | None:
    """What makes ``reply`` no observation frame of an environment with ``possible_agents``
    (``None`` when it is one)."""
    if reply.get("type") != "observation":
        return f"type {reply.get('type')!r}, where an observation was expected"
    payload = reply.get("data")
    frame = payload.get("observation") if isinstance(payload, dict) else None
    if not isinstance(frame, dict):
        return "no observation object"
    agents = frame.get("agents")
    if not isinstance(agents, list) or not all(isinstance(a, str) and a in possible_agents for a in agents):
        return f"agents {str(agents)[:80]} are not a list of the environment's agents {list(possible_agents)}"
    agent = frame.get("agent")
    if agent not in (None, "") and agent not in agents:
        return f"the agent to act {str(agent)[:40]!r} is not among the live agents {agents}"
    for key in ("rewards", "cumulative_rewards", "terminations", "truncations", "infos"):
        table = frame.get(key)
        if not isinstance(table, dict) or not set(agents) <= set(table):
            return f"{key} does not cover the live agents {agents}"
        if not set(table) <= set(possible_agents):
            return f"{key} names agents the environment does not have"
    for key in ("rewards", "cumulative_rewards"):
        for value in frame[key].values():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return f"{key} holds {str(value)[:20]}, not a finite number"
    for key in ("terminations", "truncations"):
        if not all(isinstance(value, bool) for value in frame[key].values()):
            return f"{key} holds a value that is not true or false"
    if not all(isinstance(info, dict) for info in frame["infos"].values()):
        return "infos holds a value that is not an object"
    if isinstance(frame.get("turn"), bool) or not isinstance(frame.get("turn"), int):
        return f"turn {str(frame.get('turn'))[:20]} is not an integer"
    if not isinstance(frame.get("instruction", ""), str) or not isinstance(frame.get("prompt", ""), str):
        return "the observation's text is not text"
    return None


class _RemoteRecords(Sequence):
    """A remote environment's records: ``len`` from the last frame, items from ``state``."""

    def __init__(self, env: RemoteEnv) -> None:
        self._env = env
        self._count = int(env._frame.get("num_records", 0))

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        records = [_record(data) for data in self._env.state()["records"]]
        return records[index]

    def __iter__(self) -> Iterator[ActionRecord]:
        return iter([_record(data) for data in self._env.state()["records"]])


def _record(data: dict[str, Any]) -> ActionRecord:
    return ActionRecord(
        index=data["index"],
        episode_id=data["episode_id"],
        agent=data["agent"],
        role=data["role"],
        turn=data["turn"],
        observation=data["observation"],
        action=data["action"],
        parsed=data["parsed"],
        format_ok=data["format_ok"],
        reward_components=data["reward_components"],
        reward=data["reward"],
        final=data["final"],
        info=data["info"],
        credits=[(c["component"], c["amount"], c["at"]) for c in data.get("credits", [])],
    )


def remote(url: str, **kwargs: Any) -> RemoteEnv:
    """A :class:`RemoteEnv` on the server at ``url`` (keyword options as in ``llm_envs.make``)."""
    return RemoteEnv(url, **kwargs)


def remote_runner(url: str, **client_options: Any) -> Any:
    """A runner factory for :func:`llm_envs.evaluation.evaluate` (``runner=``) that plays every
    episode on the server at ``url``: the local :class:`~llm_envs.runner.Runner`, each of its
    environment instances a :class:`RemoteEnv` (its own session)."""
    import functools

    from llm_envs.runner import Runner

    def build(plan: Any) -> Any:
        runner = Runner.from_plan(plan)
        runner.env_spec = functools.partial(RemoteEnv, url, **client_options)
        runner.env_label = plan.env_id
        return runner

    return build


def served_info(url: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """What the server at ``url`` says of itself (its ``/info``: ``env_id``, ``possible_agents``,
    ``expose_reference``...)."""
    import httpx

    base = url.rstrip("/")
    if base.startswith("ws"):
        base = "http" + base[len("ws"):]
    try:
        response = httpx.get(f"{base}/info", timeout=timeout_s)
        response.raise_for_status()
        info = response.json()
        str(info["env_id"])
        return info
    except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
        raise RemoteConnectionError(f"no llm-envs server at {url}: {exc}") from exc


def served_env_id(url: str, timeout_s: float = 30.0) -> str:
    """The id of the environment the server at ``url`` serves (its ``/info``)."""
    return str(served_info(url, timeout_s)["env_id"])
