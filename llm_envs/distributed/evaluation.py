"""Evaluation on a Ray cluster: ``llm-envs eval ENV --ray [ADDRESS]``.

The episodes ``0..N-1`` of a run are cut into chunks of consecutive indices and handed to
worker actors spread over the nodes (scheduling strategy ``SPREAD``), one chunk at a time per
worker, the next as soon as one finishes. A worker is the ordinary runner
(:func:`llm_envs.runner.run_episodes`) on its own node: it builds the agents from the same specs
(a model agent loads its model there, an HTTP agent calls its server from there), keeps one
warm environment whose clones play its chunks — their sandboxes run on that node — and plays
chunk ``[a, b)`` from seeds ``seed + a .. seed + b - 1``. Episode ``i`` is therefore played from
the seed a local run gives it, by the same agents, and its result is the same (tested against
``llm-envs eval`` without ``--ray`` for reference and random agents).

The driver writes each finished chunk's episodes to ``episodes.jsonl`` (the runner's own
writer: durable lines, the same format) and, at the end, ``summary.json`` and ``plot.png`` with
the same code as a local run. Failures:

* a worker that dies (its process or node) loses only its chunk in progress: the worker is
  replaced and the chunk played again (``max_chunk_retries``), else the run stops with an error;
* any other error (an agent's, an environment's) stops the run; the episodes already written
  stay, and ``--resume`` plays only the missing ones.

Agents are called from the workers (choice: no central batching service). A local model agent
(``hf:``/``vllm:``) is loaded once per worker, so give such workers GPUs
(``--ray-gpus-per-worker``); for a served model (``openai:``) every worker sends its requests to
the server, which batches them.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_envs.runner import EpisodeResult, RunnerError, load_episodes

__all__ = ["EvalWorker", "add_ray_arguments", "cmd_eval_ray", "evaluate_on_ray"]


class EvalWorker:
    """One worker's agents and warm environment (a plain class; made a Ray actor at use).

    Args:
        env_id: Registered environment id.
        env_kwargs: Constructor keywords (split included).
        assignments: Agent id (None: default) → agent spec (text or
            :class:`~llm_envs.agents.spec.AgentSpec` with options), as ``llm-envs eval`` takes them.
        model_defaults: Sampling defaults for model agents.
        seed: The run's seed (episode ``i`` is played from ``seed + i``).
        concurrency: Environment instances in play at once in this worker.
        max_batch_size: Most requests per agent call.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], assignments: Mapping[str | None, Any],
                 model_defaults: Mapping[str, Any] | None, seed: int, concurrency: int,
                 max_batch_size: int | None) -> None:
        import llm_envs
        from llm_envs.agents.spec import resolve_agents

        self.env_id = env_id
        self.first = llm_envs.make(env_id, **dict(env_kwargs))
        self.agents = resolve_agents(dict(assignments), list(self.first.possible_agents), default="reference",
                                     model_defaults=dict(model_defaults or {}))
        self.seed = seed
        self.concurrency = concurrency
        self.max_batch_size = max_batch_size

    def info(self) -> dict[str, Any]:
        import socket

        from llm_envs.distributed.cluster import node_info

        names = {a: getattr(agent, "name", type(agent).__name__) for a, agent in self.agents.items()}
        try:
            node = node_info()
        except Exception:  # noqa: BLE001 - outside Ray (tests of the plain class)
            node = {"host": socket.gethostname(), "pid": str(os.getpid())}
        return {**node, "agents": names}

    def play(self, start: int, count: int) -> list[dict[str, Any]]:
        """Episodes ``start .. start + count - 1`` of the run, as :meth:`EpisodeResult.to_dict`."""
        from llm_envs.runner import run_episodes

        results = run_episodes(
            self.first.clone,  # clones share the warm environment's sandbox and task source
            self.agents, count, seed=self.seed + start, concurrency=min(self.concurrency, count),
            max_batch_size=self.max_batch_size, env_label=self.env_id,
        )
        out = []
        for result in results:
            result.index += start
            out.append(result.to_dict())
        return out

    def close(self) -> None:
        for agent in {id(a): a for a in self.agents.values()}.values():
            agent.close()
        self.first.close()


def _chunks(todo: Sequence[int], size: int) -> list[tuple[int, int]]:
    """Runs of consecutive indices of ``todo`` as ``(start, count)``, each at most ``size`` long."""
    out: list[tuple[int, int]] = []
    for i in todo:
        if out and out[-1][0] + out[-1][1] == i and out[-1][1] < size:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


def evaluate_on_ray(
    env_id: str,
    assignments: Mapping[str | None, Any],
    *,
    episodes: int = 50,
    seed: int = 0,
    concurrency: int = 8,
    env_kwargs: Mapping[str, Any] | None = None,
    split: str | None = None,
    out_dir: str | os.PathLike[str],
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    plot: bool = True,
    max_batch_size: int | None = None,
    model_defaults: Mapping[str, Any] | None = None,
    address: str | None = None,
    workers: int | None = None,
    cpus_per_worker: float = 1.0,
    gpus_per_worker: float = 0.0,
    chunk_size: int | None = None,
    max_chunk_retries: int = 1,
    settings: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """:func:`llm_envs.evaluation.evaluate` with the episodes played by Ray workers.

    Args:
        env_id: A registered environment id.
        assignments: Agent id (None: every other agent) → agent spec (text or ``AgentSpec``).
        episodes, seed, env_kwargs, split, out_dir, resume, overwrite, progress, plot,
            max_batch_size, settings, log: As for :func:`~llm_envs.evaluation.evaluate` (the
            split defaults to ``test`` for environments that have splits).
        concurrency: Environment instances in play at once *per worker*.
        model_defaults: Sampling defaults for model agents.
        address: Ray address; None starts a private local instance unless Ray is already
            initialised in this process.
        workers: Worker actors (default: the cluster's CPUs / ``cpus_per_worker``, at most one
            per chunk).
        cpus_per_worker, gpus_per_worker: Resources each worker reserves.
        chunk_size: Episodes per chunk (default: ``2 × concurrency``).
        max_chunk_retries: Times a chunk whose worker died is played again.
    """
    from llm_envs.distributed.cluster import Cluster
    from llm_envs.evaluation.evaluate import (
        EPISODES_FILE,
        PLOT_FILE,
        SUMMARY_FILE,
        _write_json_atomically,
        resolve_split,
    )
    from llm_envs.evaluation.plot import PLOT_MISSING, plot_available, plot_summary
    from llm_envs.evaluation.summary import summarize
    from llm_envs.runner import _EpisodeWriter

    log = log or (lambda message: None)
    out = Path(out_dir)
    episodes_path = out / EPISODES_FILE
    if episodes_path.exists() and episodes_path.stat().st_size > 0 and not resume:
        if not overwrite:
            raise RunnerError(f"{out} already holds a run; pass --resume to continue it, --overwrite to replace "
                              "it, or choose another --out")
        episodes_path.unlink()
        for stale in (SUMMARY_FILE, PLOT_FILE):
            (out / stale).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    env_kwargs = resolve_split(env_id, split, env_kwargs or {})
    label = env_id if "/" in env_id else f"llm/{env_id}"

    cluster = Cluster(address)
    ray = cluster.ray
    actors: list[Any] = []
    try:
        _refuse_shared_state(env_id, env_kwargs)
        done: dict[int, EpisodeResult] = {}
        if resume:
            for result in load_episodes(episodes_path, repair=True):
                if result.index < episodes:
                    done.setdefault(result.index, result)
        todo = [i for i in range(episodes) if i not in done]
        size = max(1, chunk_size or 2 * concurrency)
        chunks = deque(_chunks(todo, size))
        if workers is None:
            workers = max(1, int(cluster.totals()["CPU"] // max(cpus_per_worker, 1e-9)))
        workers = max(1, min(workers, len(chunks) or 1))
        worker_cls = ray.remote(EvalWorker)
        options = {"num_cpus": cpus_per_worker, "num_gpus": gpus_per_worker, "scheduling_strategy": "SPREAD",
                   "max_restarts": 0}
        args = (env_id, env_kwargs, dict(assignments), dict(model_defaults or {}), seed, concurrency, max_batch_size)

        def start() -> Any:
            return worker_cls.options(**options).remote(*args)

        actors = [start() for _ in range(workers)]
        try:
            infos = ray.get([a.info.remote() for a in actors])
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            raise RunnerError(f"a Ray worker could not start (its agents or environment failed to build): {exc}") from exc
        names = infos[0]["agents"]
        for result in done.values():
            _check_resumed(result, label, seed, names, episodes_path)
        log(f"ray: {workers} worker(s) on {len({i.get('node_id', i['host']) for i in infos})} node(s), "
            f"{len(chunks)} chunk(s) of <= {size} episodes, {len(done)} episode(s) resumed")

        bar = _progress_bar(episodes, len(done), label) if progress else None
        writer = _EpisodeWriter(episodes_path)
        new: dict[int, EpisodeResult] = {}
        retries: dict[tuple[int, int], int] = {}
        started = time.perf_counter()
        in_flight: dict[Any, tuple[int, tuple[int, int]]] = {}
        try:
            idle = deque(range(workers))
            while chunks or in_flight:
                while idle and chunks:
                    w, chunk = idle.popleft(), chunks.popleft()
                    in_flight[actors[w].play.remote(*chunk)] = (w, chunk)
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                ref = ready[0]
                w, chunk = in_flight.pop(ref)
                try:
                    rows = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                    retries[chunk] = retries.get(chunk, 0) + 1
                    if retries[chunk] > max_chunk_retries:
                        raise RunnerError(
                            f"episodes {chunk[0]}..{chunk[0] + chunk[1] - 1}: their worker was lost "
                            f"{retries[chunk]} times ({type(exc).__name__}); the {len(done) + len(new)} finished "
                            f"episodes are in {episodes_path}; --resume plays the rest"
                        ) from exc
                    log(f"ray: worker {w} lost ({type(exc).__name__}); playing episodes "
                        f"{chunk[0]}..{chunk[0] + chunk[1] - 1} again on a new worker")
                    ray.kill(actors[w], no_restart=True)
                    actors[w] = start()
                    chunks.appendleft(chunk)
                    idle.append(w)
                    continue
                for row in sorted(rows, key=lambda r: r["index"]):
                    result = EpisodeResult.from_dict(row)
                    writer.write(result)
                    new[result.index] = result
                    if bar is not None:
                        bar.update(1)
                idle.append(w)
        finally:
            writer.close()
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - started
        results = [{**done, **new}[i] for i in sorted({**done, **new})]
        summary = summarize(results, extra={
            "seed": seed,
            "split": env_kwargs.get("split"),
            "env_kwargs": {k: v for k, v in env_kwargs.items() if k != "split"},
            "concurrency": concurrency,
            "wall_s": wall,
            "episodes_played_now": len(new),
            "episodes_resumed": len(done),
            "episodes_per_s": len(new) / wall if wall > 0 and new else None,
            "ray": {"workers": workers, "nodes": sorted({i.get("node_id", i["host"]) for i in infos}),
                    "cpus_per_worker": cpus_per_worker, "gpus_per_worker": gpus_per_worker, "chunk_size": size},
            **dict(settings or {}),
        })
        _write_json_atomically(out / SUMMARY_FILE, summary)
        if plot:
            if plot_available():
                plot_summary(summary, out / PLOT_FILE)
            else:
                log(PLOT_MISSING)
        return summary
    finally:
        for actor in actors:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead worker has nothing to close
                pass
            ray.kill(actor, no_restart=True)
        cluster.close()


def _refuse_shared_state(env_id: str, env_kwargs: Mapping[str, Any]) -> None:
    """An environment whose instances share cross-episode state (a question pool that grows as
    episodes finish) plays differently when its instances are spread over processes."""
    import llm_envs
    from llm_envs.core.env import TextEnv

    env = llm_envs.make(env_id, **dict(env_kwargs))
    try:
        if type(env).state_dict is not TextEnv.state_dict:
            raise RunnerError(f"{env_id} keeps state across episodes (TextEnv.state_dict) that its instances share; "
                              "spread over Ray workers each would grow its own: evaluate it without --ray")
    finally:
        env.close()


def _check_resumed(result: EpisodeResult, env_id: str, seed: int, names: Mapping[str, str], path: Path) -> None:
    if result.env_id != env_id or result.seed != seed + result.index:
        raise RunnerError(f"{path} holds episode {result.index} of another run (env {result.env_id!r}, seed "
                          f"{result.seed}; this run: env {env_id!r}, seed {seed + result.index}); refusing to mix them")
    if dict(result.agents) != dict(names):
        raise RunnerError(f"{path} holds episode {result.index} played by other agents ({result.agents}; this run: "
                          f"{dict(names)}); refusing to mix them")


def _progress_bar(total: int, initial: int, label: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc=f"{label} (ray)", unit="ep", dynamic_ncols=True)


# ---------------------------------------------------------------------------- the command line
def add_ray_arguments(parser: Any) -> None:
    """``--ray [ADDRESS]`` and its options, for ``llm-envs eval``."""
    group = parser.add_argument_group("cluster (Ray; pip install 'llm-envs[ray]')")
    group.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="play the episodes on Ray workers: on the cluster at ADDRESS ('auto': the one this "
                            "node joined), or on a private local Ray instance without ADDRESS (docs/scaling.md)")
    group.add_argument("--ray-workers", type=int, help="worker actors (default: cluster CPUs / CPUs per worker)")
    group.add_argument("--ray-cpus-per-worker", type=float, default=1.0, help="CPUs each worker reserves (default 1)")
    group.add_argument("--ray-gpus-per-worker", type=float, default=0.0,
                       help="GPUs each worker reserves (local model agents load their model in every worker)")
    group.add_argument("--ray-chunk-size", type=int, help="episodes per chunk (default: 2 x --concurrency)")


def cmd_eval_ray(args: Any, env_id: str, env_kwargs: Mapping[str, Any]) -> int:
    """The ``llm-envs eval --ray`` branch: same options, output and files as a local run."""
    from llm_envs.agents.spec import load_agents_config, parse_assignments
    from llm_envs.cli._common import CLIError, slug
    from llm_envs.distributed.cluster import RayMissingError
    from llm_envs.evaluation import format_summary

    assignments = load_agents_config(args.agents_file) if args.agents_file else {}
    for key, spec in parse_assignments(args.agent or []).items():
        assignments[key] = spec  # the command line wins over the file
    if any(spec.kind == "human" for spec in assignments.values()):
        raise CLIError("a human agent plays at this terminal: evaluate without --ray")
    specs = {("*" if k is None else k): str(v) for k, v in assignments.items()} or {"*": "reference"}
    model_defaults = {
        "temperature": args.temperature, "top_p": args.top_p, "max_tokens": args.max_tokens, "stop": args.stop,
        "seed": args.sampling_seed, "max_concurrency": args.max_concurrency, "timeout_s": args.timeout,
    }
    out = args.out or Path("runs") / "eval" / env_id.split("/")[-1] / slug(
        "+".join(f"{k}={v}" if k != "*" else v for k, v in sorted(specs.items())) + f"-seed{args.seed}"
    )
    print(f"evaluating {env_id} on Ray: {specs}; {args.episodes} episodes, concurrency {args.concurrency} per "
          f"worker; writing to {out}", file=sys.stderr)
    try:
        summary = evaluate_on_ray(
            env_id, dict(assignments), episodes=args.episodes, seed=args.seed, concurrency=args.concurrency,
            env_kwargs=env_kwargs, out_dir=out, resume=args.resume, overwrite=args.overwrite,
            progress=not args.no_progress, plot=not args.no_plot, max_batch_size=args.max_batch_size,
            model_defaults=model_defaults, address=args.ray or None, workers=args.ray_workers,
            cpus_per_worker=args.ray_cpus_per_worker, gpus_per_worker=args.ray_gpus_per_worker,
            chunk_size=args.ray_chunk_size,
            settings={"agent_specs": specs, "command": "llm-envs " + " ".join(sys.argv[1:])},
            log=lambda message: print(message, file=sys.stderr),
        )
    except RayMissingError as exc:
        raise CLIError(str(exc)) from exc
    print(format_summary(summary))
    print(f"\nwrote {out}/summary.json, {out}/episodes.jsonl" + ("" if args.no_plot else f", {out}/plot.png"))
    return 0
