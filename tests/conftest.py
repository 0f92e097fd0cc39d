"""Shared pytest configuration: every test runs offline; all but the CUDA ones (skipped without a GPU) on the CPU."""

import os

# Tests never reach a model hub: fail fast instead of hanging on a download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# A Coder-Tester step of a bundled HumanEval problem would read the mutants chosen before release
# (llm_envs.envs.coder_tester.shipped) instead of choosing them: the tests of the choice need it
# made. The tests of the shipped choices turn them on themselves.
os.environ["LLM_ENVS_SHIPPED_MUTANTS"] = "off"

# Under pytest-xdist every worker is its own process. Torch's default of one OpenMP thread per
# core would put (workers x cores) spinning threads on the cores; measured on 2 cores, that made a
# 20 s training test take 157 s. One intra-op thread per worker keeps the CPU tests fast.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

# Property tests check correctness, not speed: on a loaded 2-core CI machine one example can take
# longer than Hypothesis' default 200 ms deadline, which would fail the run for nothing.
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("llm_envs", deadline=None)
    _hypothesis_settings.load_profile("llm_envs")
except ImportError:  # hypothesis is part of the test extra; without it those tests do not import
    pass
