"""Shared pytest configuration: every test runs offline and on the CPU."""

import os

# Tests never reach a model hub: fail fast instead of hanging on a download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
