"""Ray for the scale-out tests: one small local instance per pytest process, shared by the
modules that need it, and a simulated two-node cluster for the modules that ask for one.

The machine is shared: no dashboard, a private temporary directory (``RAY_TMPDIR``: Ray's
cluster utilities write there too), a small object store, two CPUs. Every Ray worker imports the
test helpers from the repository and installs the fake vLLM (a real one needs a GPU), so engine
actors of kind ``vllm`` run against it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the scale-out tests need Ray: pip install 'llm-envs[ray]'")

OBJECT_STORE = 96 * 1024 * 1024
ROOT = str(Path(__file__).resolve().parents[2])
RUNTIME_ENV = {
    "env_vars": {"PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")},
    "worker_process_setup_hook": "tests.trainers.fake_vllm.install_in_process",
}
SYMBOLS = ("red", "green", "blue", "yellow")

#: What this process is connected to: None, "local" or "cluster".
_CONNECTED: dict[str, str | None] = {"kind": None}


@pytest.fixture(scope="session")
def ray_tmpdir():
    """A private Ray directory for this pytest process; Ray is shut down at the end."""
    old = os.environ.get("RAY_TMPDIR")
    path = tempfile.mkdtemp(prefix="rt")
    os.environ["RAY_TMPDIR"] = path
    yield path
    if ray.is_initialized():
        ray.shutdown()
    _CONNECTED["kind"] = None
    if old is None:
        os.environ.pop("RAY_TMPDIR", None)
    else:
        os.environ["RAY_TMPDIR"] = old
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def local_ray(ray_tmpdir):
    """A local one-node Ray instance with two CPUs (started once, reused by later modules)."""
    if _CONNECTED["kind"] != "local":
        if ray.is_initialized():
            ray.shutdown()
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=OBJECT_STORE, _temp_dir=ray_tmpdir,
                 log_to_driver=False, runtime_env=RUNTIME_ENV)
        _CONNECTED["kind"] = "local"
    yield ray


@pytest.fixture(scope="module")
def two_node_ray(ray_tmpdir):
    """A simulated two-node cluster (``ray.cluster_utils.Cluster``), one CPU per node."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    _CONNECTED["kind"] = "cluster"
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": OBJECT_STORE})
    cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
    ray.init(address=cluster.address, log_to_driver=False, runtime_env=RUNTIME_ENV)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()
    _CONNECTED["kind"] = None


def signalling_reply(policy, observation, candidate):
    """Deterministic Signalling play: the speaker names the target shifted by the candidate number,
    the listener repeats the message shifted likewise (so tree groups see different rewards)."""
    text = observation["prompt"]
    word = re.search(r"(?:Target|Message): (\w+)", text)
    base = SYMBOLS.index(word.group(1)) if word and word.group(1) in SYMBOLS else 0
    return SYMBOLS[(base + candidate) % len(SYMBOLS)]


@pytest.fixture(scope="session")
def tiny_signalling_model(tmp_path_factory) -> str:
    """A tiny random-weight model with a tokenizer trained on Signalling's texts (CPU)."""
    pytest.importorskip("torch", reason="the learner and engine tests need the 'train' extra")
    pytest.importorskip("transformers", reason="the learner and engine tests need the 'train' extra")
    pytest.importorskip("peft", reason="the learner and engine tests need the 'train' extra")
    from llm_trainers.tiny import build_tiny_model, env_corpus

    path = tmp_path_factory.mktemp("tiny_signalling")
    build_tiny_model(path, env_corpus("llm/Signalling-v0", episodes=60, rounds=2), seed=0)
    return str(path)


# ---------------------------------------------------------------- local reference rollouts
#: The environment the rollout-equality tests play (scripted Signalling, 3 rounds).
ENV = "llm/Signalling-v0"
KWARGS = {"rounds": 3}


def agent_as_policy(agent):
    return agent


def local_rollout(seeds, **kw):
    """The rollout the distributed layouts must reproduce: the same seeds, in this process."""
    import llm_envs
    from llm_trainers.rollout import collect, spawn_envs
    from llm_trainers.scripted import ScriptedEngine

    envs = spawn_envs(llm_envs.make(ENV, **KWARGS), len(seeds))
    return collect(envs, seeds, ScriptedEngine(signalling_reply), agent_as_policy, **kw)


def rollout_data(result):
    """A rollout's records and episode metrics as plain data (for equality)."""
    import dataclasses

    return [dataclasses.asdict(r) for r in result.records], result.episodes
