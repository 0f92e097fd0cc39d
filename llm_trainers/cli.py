"""``llm-train``: train agents in an environment from a YAML config.

Examples::

    llm-train signalling_at_grpo_l1                      # a shipped config, by name
    llm-train my.yaml train.lr=1e-5 rollout.k=8          # a file, with overrides
    llm-train my.yaml --resume                           # continue the run in its output_dir
    llm-train --list                                     # shipped configs
    llm-train my.yaml --print-config                     # the resolved config, then exit
    llm-train my.yaml --plan                             # where the resources section puts each actor
    llm-train my.yaml --sft-only                         # only the warm start (config section sft)
    llm-train my.yaml --export-demonstrations demos.jsonl --episodes 200   # reference agents' demos
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="llm-train",
        description="Train LLM agents with AT-GRPO or the REINFORCE++ family (see docs/training.md).",
    )
    p.add_argument("config", nargs="?", help="YAML config file, or the name of a shipped config")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides (values parsed as YAML)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in run.output_dir")
    p.add_argument("--overwrite", action="store_true", help="start afresh even if run.output_dir has checkpoints")
    p.add_argument("--list", action="store_true", help="list the shipped configs and exit")
    p.add_argument("--print-config", action="store_true", help="print the resolved config as YAML and exit")
    p.add_argument("--eval-only", action="store_true", help="evaluate the (possibly resumed) policies and exit")
    p.add_argument("--plan", action="store_true",
                   help="print where the resources section puts every actor (no cluster needed) and exit")
    p.add_argument("--sft-only", action="store_true",
                   help="run only the supervised warm start (config section sft; resumable with --resume) and exit")
    p.add_argument("--export-demonstrations", metavar="FILE",
                   help="write the reference agents' demonstrations the sft section describes (training seeds) "
                        "to FILE as JSONL in the chat 'messages' format, and exit")
    p.add_argument("--episodes", type=int, default=100,
                   help="episodes played for --export-demonstrations (default 100)")
    return p


def _error(message: str) -> int:
    print(f"llm-train: error: {message}", file=sys.stderr)
    return 2


def _message(exc: BaseException) -> str:
    """An exception's text without the quotes ``str(KeyError)`` adds."""
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return str(exc.args[0])
    return str(exc)


def _list_configs() -> int:
    """Each shipped config: its name, the hardware it needs, and its description."""
    from llm_trainers.config import (
        config_description,
        config_from_dict,
        config_hardware,
        resolve_config_data,
        shipped_configs,
    )

    rows = []
    for name, path in shipped_configs().items():
        try:
            hardware = config_hardware(config_from_dict(resolve_config_data(path)))
        except (ValueError, KeyError, TypeError) as exc:
            hardware = f"(unreadable: {_message(exc)})"
        rows.append((name, hardware, config_description(path)))
    width = max(len(r[0]) for r in rows)
    hw_width = max(len(r[1]) for r in rows)
    print(f"{'config':{width}}  {'runs on':{hw_width}}  description")
    for name, hardware, description in rows:
        print(f"{name:{width}}  {hardware:{hw_width}}  {description}")
    return 0


def _hub_reachable(timeout_s: float = 5.0) -> bool:
    """Whether a TCP connection to the Hugging Face hub opens within ``timeout_s`` (name lookup
    included, so a machine without a network answers at once rather than after retries)."""
    import os
    import socket
    import threading
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    result: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, 443), timeout=timeout_s).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(result and result[0])


def preflight(cfg) -> str | None:  # noqa: ANN001 - a Config
    """What keeps ``cfg`` from starting on this machine, said at once (None when nothing):
    a GPU it needs and torch cannot see, a model path that does not exist, a hub model that is
    not in the local cache while the hub cannot be reached."""
    import os

    import torch

    from llm_trainers.config import config_needs_gpu, is_local_model_path, model_paths

    why = config_needs_gpu(cfg)
    if why is not None and not torch.cuda.is_available():
        return (f"this config needs a GPU ({why}) and torch sees none; on a CPU use a config that "
                "runs there (`llm-train --list` shows each config's hardware), or override "
                "rollout.engine=hf model.device=cpu with a small model.path")
    if cfg.rollout.engine == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            return ("this config's rollouts need vLLM (rollout.engine: vllm) and this Python has none: "
                    "pip install 'llm-envs[vllm]' on a GPU; on a CPU, vLLM's CPU build in its own "
                    "environment, `make vllm-venv`, then .venv-vllm/bin/python -m llm_trainers.cli (docs/training.md)")
    for path in model_paths(cfg):
        if path.startswith("tiny:"):
            continue
        if is_local_model_path(path):
            from llm_trainers.policies import model_source

            try:
                where, _ = model_source(path)
            except ValueError as exc:  # a packaged model not installed, a missing .gguf file
                return str(exc)
            if not os.path.exists(os.path.expanduser(where)):
                return f"no model at {path} (no such file or directory); set model.path to a model directory"
            continue
        try:  # a hub id: fine when cached
            from huggingface_hub import try_to_load_from_cache

            if isinstance(try_to_load_from_cache(path, "config.json"), str):
                continue
        except Exception:  # noqa: BLE001 - a malformed id: let the loader say what is wrong
            continue
        where = f"model {path} is a Hugging Face hub id that is not in the local cache"
        if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
            return f"{where}, and HF_HUB_OFFLINE is set; download it first, or set model.path to a local directory"
        if not _hub_reachable():
            return (f"{where}, and the hub cannot be reached from here; download it where it can be "
                    "(huggingface-cli download ...), or set model.path to a local directory")
        print(f"llm-train: {where}: downloading it", file=sys.stderr)
    return None


def _command(args: argparse.Namespace, *extra: str) -> str:
    import shlex

    return " ".join(["llm-train", shlex.quote(args.config), *map(shlex.quote, args.overrides), *extra])


def main(argv: Sequence[str] | None = None) -> int:
    from llm_envs.core.writing import escape_unencodable_output

    escape_unencodable_output()  # it prints transcripts and samples of what the model wrote
    # Intermixed, so that overrides may also follow a flag: `llm-train cfg --resume run.steps=300`.
    args = _parser().parse_intermixed_args(argv)
    from llm_trainers.config import config_to_dict, load_config

    if args.list:
        return _list_configs()
    if not args.config:
        _parser().print_usage(sys.stderr)
        return _error("a config (file or shipped name) is required; `llm-train --list` shows the shipped ones")
    overrides = list(args.overrides)
    try:
        cfg = load_config(args.config, overrides)
    except (ValueError, KeyError, TypeError, FileNotFoundError) as exc:  # a config problem: say what
        return _error(_message(exc))
    if args.plan:
        from llm_trainers.distributed.placement import plan_placement

        print(plan_placement(cfg).describe())
        return 0
    if args.export_demonstrations:
        return _export_demonstrations(cfg, args.export_demonstrations, args.episodes)
    if args.print_config:
        import yaml

        print(yaml.safe_dump(json.loads(json.dumps(config_to_dict(cfg), default=str)), sort_keys=False))
        return 0

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        return _error(f"{exc}. Install the training extra: pip install 'llm-envs[train]'")
    from transformers.utils import logging as transformers_logging

    from llm_trainers.checkpoint import RunDirectoryLocked, lock_run_directory

    # transformers' own bars (loading, writing shards) would cut through the run's progress bar.
    transformers_logging.disable_progress_bar()

    if args.sft_only and cfg.sft.steps <= 0:
        return _error("--sft-only: the config has no warm start (set sft.steps > 0)")
    problem = preflight(cfg)
    if problem is not None:
        return _error(problem)
    if args.resume and not cfg.output_dir.is_dir():  # (checked before the lock would create it)
        return _no_run(cfg)
    # Held from before the directory is read until the end: a second process on the same run
    # (a requeued job while the first still runs) trained the same steps and replaced the
    # first one's checkpoints; and --overwrite must not delete a running run's files.
    try:
        lock = lock_run_directory(cfg.output_dir)
    except RunDirectoryLocked as exc:
        return _error(str(exc))
    except OSError as exc:  # an output_dir that cannot be created
        return _error(f"run.output_dir: {exc}")
    with lock:
        return _run(args, cfg)


def _no_run(cfg) -> int:  # noqa: ANN001 - a Config
    return _error(f"--resume: {cfg.output_dir} holds no run to continue (no checkpoint under "
                  f"{cfg.output_dir / 'checkpoints'}, no warm start); start the run without --resume")


def _run(args: argparse.Namespace, cfg) -> int:  # noqa: ANN001 - a Config
    """Start (or resume, or evaluate) the run of ``cfg``, the run directory locked."""
    from llm_envs.core.errors import InfrastructureError
    from llm_envs.tasks.base import DatasetUnavailableError
    from llm_trainers import make_trainer
    from llm_trainers.checkpoint import (
        CheckpointError,
        CheckpointSaveError,
        RunDirectoryLocked,
        latest_checkpoint,
    )
    from llm_trainers.config import config_hardware
    from llm_trainers.trainer import has_warm_start_state, remove_run
    from sandboxes import SandboxUnavailable

    ckpts = cfg.output_dir / "checkpoints"
    try:
        holds_run = latest_checkpoint(ckpts) is not None or has_warm_start_state(cfg.output_dir)
    except CheckpointError as exc:  # a run is there, its pointer damaged: never overwritten unasked
        if not args.overwrite or args.resume:
            return _error(str(exc))
        holds_run = True
    if not args.resume and holds_run and not args.overwrite:
        return _error(f"{cfg.output_dir} already holds a run; pass --resume to continue it or --overwrite to start afresh")
    if args.resume and not holds_run:
        return _no_run(cfg)
    if args.overwrite and not args.resume:
        # Everything the old run wrote: its W&B run id kept, the new run was logged into the old
        # W&B run, and TensorBoard showed both runs' points as one.
        removed = remove_run(cfg.output_dir)
        if removed:
            print(f"llm-train: --overwrite: removed the previous run's {', '.join(removed)} from {cfg.output_dir}",
                  file=sys.stderr)
    what = "evaluating" if args.eval_only else ("resuming" if args.resume else "training")
    print(f"llm-train: {what} {args.config}: {cfg.env.id}, level {cfg.model.level}, model {cfg.model.path}, "
          f"{cfg.run.steps} steps, on {config_hardware(cfg)}; writing to {cfg.output_dir}", file=sys.stderr)
    try:
        trainer = make_trainer(cfg, resume=args.resume)
    except ImportError as exc:  # e.g. a resources section without Ray installed
        return _error(str(exc))
    except (DatasetUnavailableError, SandboxUnavailable) as exc:  # data or a backend this machine lacks
        return _error(str(exc))
    except ValueError as exc:  # e.g. --resume with other settings than the run's, a damaged checkpoint
        return _error(str(exc))
    except RunDirectoryLocked as exc:  # (held by this process already: only if the directory moved)
        return _error(str(exc))
    except OSError as exc:  # a model or tokenizer that cannot be loaded (hub, files)
        return _error(f"cannot load the model: {exc}")
    except InfrastructureError as exc:  # env.url: no server there (a wrong URL)
        return _error(str(exc))
    try:
        if args.sft_only:
            metrics = trainer.warm_start()
            print(json.dumps({"sft_steps": cfg.sft.steps, "output_dir": str(cfg.output_dir / "sft"), **metrics},
                             indent=2))
            return 0
        if args.eval_only:
            metrics = trainer.evaluate()
        else:
            metrics = trainer.train()
    except KeyboardInterrupt:
        last = latest_checkpoint(ckpts)
        saved = f"the last checkpoint is {last}" if last is not None else "no checkpoint was written yet"
        resume = _command(args, "--resume") if last is not None else _command(args, "--overwrite")
        print(f"\nllm-train: interrupted at step {trainer.step}; {saved}. Continue with:\n  {resume}",
              file=sys.stderr)
        return 130
    except InfrastructureError as exc:  # env.url: the server went away or is at capacity
        last = latest_checkpoint(ckpts)
        then = (f"; once that is fixed, continue from {last} with:\n  {_command(args, '--resume')}"
                if last is not None else "")
        print(f"llm-train: error at step {trainer.step}: {exc}{then}", file=sys.stderr)
        return 3
    except CheckpointSaveError as exc:  # a full disk, a file system error: the run stops there
        last = latest_checkpoint(ckpts)
        then = (f"once that is fixed, continue from {last} with: {_command(args, '--resume')}" if last is not None
                else f"no checkpoint was written; once that is fixed, start again with: {_command(args, '--overwrite')}")
        print(f"llm-train: error at step {trainer.step}: {exc}; {then}", file=sys.stderr)
        return 3
    finally:
        trainer.close()
    from llm_envs.report import write_report_safely  # the run's report.html: curves and transcripts

    log = lambda message: print(message, file=sys.stderr)  # noqa: E731
    report = write_report_safely(cfg.output_dir, log=log)
    print(json.dumps({"step": trainer.step, "output_dir": str(cfg.output_dir), **metrics}, indent=2))
    if report:
        print(f"llm-train: wrote {report} (open it in a browser)", file=sys.stderr)
    return 0


def _export_demonstrations(cfg, path: str, episodes: int) -> int:
    """``--export-demonstrations``: the sft section's demonstrations of ``episodes`` episodes."""
    from llm_trainers.demonstrations import iter_demonstrations, write_jsonl

    s = cfg.sft
    if episodes < 1:
        print("llm-train: error: --episodes must be >= 1", file=sys.stderr)
        return 2
    try:
        n = write_jsonl(iter_demonstrations(
            cfg.env.id, {**cfg.env.kwargs, **s.env_kwargs}, episodes=episodes, agents=s.agents, roles=s.roles,
            run_seed=cfg.run.seed, random_fraction=s.random_fraction, perturb_fraction=s.perturb_fraction,
            max_decisions=cfg.env.max_decisions, successful_only=s.successful_only), path)
    except ValueError as exc:
        print(f"llm-train: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"examples": n, "episodes": episodes, "path": path}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
