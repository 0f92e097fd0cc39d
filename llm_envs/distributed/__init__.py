"""Evaluation on a Ray cluster (``llm-envs eval ... --ray``) and the Ray connection the trainers
share. Ray is imported lazily: ``llm_envs`` imports and runs without it.

=============================  ==============================================================
``cluster``                    joining or starting Ray, checking and reserving its resources
``evaluation``                 episodes spread over worker actors on every node
=============================  ==============================================================
"""

__all__: list[str] = []
