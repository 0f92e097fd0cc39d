"""Model agents that need torch: Hugging Face transformers (CPU/GPU) and vLLM (GPU).

``llm_trainers.agents.vllm`` imports vLLM lazily, so this package imports without it.
"""

from llm_trainers.agents.hf import (
    Generation,
    HFAgent,
    HFEngine,
    SamplingParams,
    encode_observation,
)

__all__ = ["Generation", "HFAgent", "HFEngine", "SamplingParams", "encode_observation"]
