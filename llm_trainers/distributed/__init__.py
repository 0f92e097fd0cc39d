"""Scale-out: environment workers, inference engines and learner ranks as Ray actors and torch
distributed groups (docs/scaling.md).

The single-process layout stays the default; a config's ``resources`` section moves parts out:

=============================  ==============================================================
``placement``                  the layout on paper: which actor on which node (no Ray needed)
``cluster``                    joining or starting Ray, placement groups, actor options
``env_workers``                environment instances (and their sandboxes) in Ray actors
``engines``                    HF / vLLM inference engines as data-parallel Ray actors
``learner``                    the learner over torch.distributed ranks (FSDP2), in Ray actors
``trainer``                    :class:`DistributedTrainer`: the loop with those parts
``scripted``                   a deterministic text engine (tests and benchmarks)
=============================  ==============================================================

Everything here imports Ray lazily: ``llm_trainers`` works without it.
"""

__all__: list[str] = []
