"""Inference engines as Ray actors, data-parallel: HF engines on the CPU, and the vLLM engine's
orchestration against the computing fake of vLLM (tests/trainers/fake_vllm.py), loaded into every
Ray worker by a setup hook (tests/distributed/conftest.py)."""

from __future__ import annotations

import tempfile

import pytest

torch = pytest.importorskip("torch", reason="the engine tests need the 'train' extra")
ray = pytest.importorskip("ray", reason="the scale-out tests need Ray")

from llm_trainers.agents.hf import HFEngine, SamplingParams  # noqa: E402
from llm_trainers.batching import completion_logprobs, pack_sequences  # noqa: E402
from llm_trainers.config import VLLMConfig, load_config  # noqa: E402
from llm_trainers.distributed.engines import DataParallelEngine, EngineSpec, engine_seed  # noqa: E402
from llm_trainers.specs import policy_spec  # noqa: E402

AGENTS = ["speaker", "listener"]
OBS = [{"instruction": "You are the speaker. Symbols: red green blue yellow.", "prompt": f"Round 1 of 2. Target: {c}"}
       for c in ("red", "green", "blue", "yellow", "red")]


def _spec(model_dir, level, kind="hf", **extra):
    overrides = [f"model.path={model_dir}", "model.device=cpu", "model.dtype=float32", f"model.level={level}"]
    if level == "L2":
        overrides.append("model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}")
    cfg = load_config(None, overrides)
    return cfg, EngineSpec(kind=kind, policy=policy_spec(cfg, AGENTS, model_dir), sampling=SamplingParams(max_new_tokens=3),
                           seed=7, **extra)


def _requests(engine, policies):
    return [(policies[i % len(policies)], engine.encode(policies[i % len(policies)], obs)) for i, obs in enumerate(OBS)]


def _rows(rows):
    return [[(g.token_ids, g.text) for g in row] for row in rows]


def _perturb(policies, seed):
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for pol in policies:
            for _, p in pol.named_trainable_parameters():
                p.add_(torch.randn_like(p) * 0.05)


def _gap(policy, prompt, row):
    """Largest |engine log-prob − policy log-prob| over one request's samples."""
    batch = pack_sequences([prompt] * len(row), [g.token_ids for g in row], policy.tokenizer.pad_token_id)
    with torch.no_grad(), policy.activated() as model:
        lp, _ = completion_logprobs(model, batch)
    return max(float((torch.tensor(g.logprobs) - lp[i, : len(g.token_ids)]).abs().max()) for i, g in enumerate(row))


def test_hf_engines_sample_as_local_engines_and_follow_every_sync(local_ray, tiny_signalling_model):
    """L2 (adapters move); full weights move through the same load path, and the vLLM test below
    covers them on the engine side."""
    cfg, spec = _spec(tiny_signalling_model, "L2")
    mirror = spec.policy.build()
    names = mirror.names()
    dp = DataParallelEngine.start(spec, 2, mirror, gpus=0, cpus=0.5)
    try:
        reference = [HFEngine(spec.policy.build(), spec.sampling, seed=engine_seed(spec.seed, i))
                     for i in range(2)]
        requests = _requests(dp, names)
        for step in range(2):
            rows = dp.generate_multi(requests, n=2)
            # engine 0 took requests 0-2, engine 1 requests 3-4, each with its own stream
            expected = reference[0].generate_multi(requests[:3], n=2) + reference[1].generate_multi(requests[3:], n=2)
            assert _rows(rows) == _rows(expected)
            for (policy, prompt), row in zip(requests, rows):
                assert _gap(mirror[policy], prompt, row) < 1e-4
            # an update: the mirror moves, sync sends it to both engines (adapters only under L2)
            _perturb(mirror, seed=step)
            for ref in reference:
                _perturb(ref.policies, seed=step)
            pushed = dp.sync()
            trainable = sum(t.numel() * t.element_size() for p in mirror for t in p.trainable_state_dict().values())
            assert pushed["weight_push_bytes"] == 2 * trainable
        # evaluation streams: a fresh view samples what a fresh local view samples, twice alike
        view_rows = dp.view(seed=11).generate_multi(requests[:3], n=1)
        expected = (reference[0].view(seed=engine_seed(11, 0)).generate_multi(requests[:2], n=1)
                    + reference[1].view(seed=engine_seed(11, 1)).generate_multi(requests[2:3], n=1))
        assert _rows(view_rows) == _rows(expected)
        assert _rows(dp.view(seed=11).generate_multi(requests[:3], n=1)) == _rows(view_rows)
        # a checkpointed sampling state replays the same samples
        state = dp.state_dict()
        first = dp.generate_multi(requests, n=2)
        dp.load_state_dict(state)
        assert _rows(dp.generate_multi(requests, n=2)) == _rows(first)
    finally:
        dp.close()


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_vllm_engine_actors_serve_every_update(local_ray, tiny_signalling_model, level):
    cfg, spec = _spec(tiny_signalling_model, level, kind="vllm", vllm=VLLMConfig(
        max_model_len=256, gpu_memory_utilization=0.4, enforce_eager=True, max_lora_rank=8,
        adapter_dir=tempfile.mkdtemp(prefix="adapters")))
    mirror = spec.policy.build()
    names = mirror.names()
    dp = DataParallelEngine.start(spec, 2, mirror, gpus=0, cpus=0.5)
    try:
        assert {i["kind"] for i in dp.infos} == {"vllm"}
        requests = _requests(dp, names)
        for step in range(2):
            _perturb(mirror, seed=10 + step)
            pushed = dp.sync()
            trainable = sum(t.numel() * t.element_size() for p in mirror for t in p.trainable_state_dict().values())
            assert pushed["weight_push_bytes"] == 2 * trainable  # the adapters only, under L2
            for (policy, prompt), row in zip(requests, dp.generate_multi(requests, n=2)):
                assert _gap(mirror[policy], prompt, row) < 1e-4, "an engine serves stale weights"
        for actor in dp.actors:
            kinds = ray.get(actor.__ray_call__.remote(
                lambda worker: [e[0] for llm in worker.engine.engines.values() for e in llm.events]))
            if level == "L1":
                assert kinds.count("collective_rpc") == 2  # full weights: one push per update
            else:
                # adapters only: each policy's new adapter loaded after each of the two syncs
                assert "collective_rpc" not in kinds and kinds.count("load_lora") >= 2 * len(names)
            assert kinds.count("reset_prefix_cache") >= 2
    finally:
        dp.close()
