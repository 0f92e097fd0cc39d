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


def main(argv: Sequence[str] | None = None) -> int:
    # Intermixed, so that overrides may also follow a flag: `llm-train cfg --resume run.steps=300`.
    args = _parser().parse_intermixed_args(argv)
    from llm_trainers.config import config_to_dict, load_config, shipped_configs

    if args.list:
        for name, path in shipped_configs().items():
            print(f"{name:40s} {path}")
        return 0
    if not args.config:
        _parser().print_usage(sys.stderr)
        print("llm-train: error: a config (file or shipped name) is required", file=sys.stderr)
        return 2
    overrides = list(args.overrides)
    try:
        cfg = load_config(args.config, overrides)
    except (ValueError, KeyError, TypeError, FileNotFoundError) as exc:  # a config problem: say what
        print(f"llm-train: error: {exc}", file=sys.stderr)
        return 2
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
        print(f"llm-train: error: {exc}. Install the training extra: pip install 'llm-envs[train]'", file=sys.stderr)
        return 2
    from llm_trainers import make_trainer
    from llm_trainers.checkpoint import latest_checkpoint
    from llm_trainers.trainer import has_warm_start_state

    ckpts = cfg.output_dir / "checkpoints"
    holds_run = latest_checkpoint(ckpts) is not None or has_warm_start_state(cfg.output_dir)
    if not args.resume and holds_run and not args.overwrite:
        print(
            f"llm-train: error: {cfg.output_dir} already holds a run; pass --resume to continue it "
            "or --overwrite to start afresh",
            file=sys.stderr,
        )
        return 2
    if args.overwrite and not args.resume and ckpts.exists():
        import shutil

        shutil.rmtree(ckpts)
    if args.overwrite and not args.resume and (cfg.output_dir / "sft").exists():
        import shutil

        shutil.rmtree(cfg.output_dir / "sft")
    if args.sft_only and cfg.sft.steps <= 0:
        print("llm-train: error: --sft-only: the config has no warm start (set sft.steps > 0)", file=sys.stderr)
        return 2
    try:
        trainer = make_trainer(cfg, resume=args.resume)
    except ImportError as exc:  # e.g. a resources section without Ray installed
        print(f"llm-train: error: {exc}", file=sys.stderr)
        return 2
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
    finally:
        trainer.close()
    from llm_envs.report import write_report_safely  # the run's report.html: curves and transcripts

    write_report_safely(cfg.output_dir, log=lambda message: print(message, file=sys.stderr))
    print(json.dumps({"step": trainer.step, "output_dir": str(cfg.output_dir), **metrics}, indent=2))
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
