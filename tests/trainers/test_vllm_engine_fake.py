"""VLLMEngine's orchestration, run on the CPU against a computing fake of vLLM's offline API.

``tests/trainers/fake_vllm.py`` follows vLLM's documented shapes and behaviour (per-request seeds,
LoRA adapters cached by ``lora_int_id``, a prefix cache keyed by LoRA name and tokens, the
``collective_rpc`` worker extension, sleep mode) and computes with the tiny model, so the log-probs
the engine reports can be compared with a forward pass of the learner's policy. What only a real
vLLM on a GPU can show (its kernels, CUDA IPC weight handles, memory, version quirks) stays with
``test_vllm_agent.py``.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import torch

from llm_trainers.agents import vllm as vllm_mod
from llm_trainers.agents.hf import SamplingParams
from llm_trainers.batching import completion_logprobs, pack_sequences
from llm_trainers.config import VLLMConfig, load_config
from llm_trainers.policies import LoraSettings, build_policies
from tests.trainers import fake_vllm

SPEAKER_OBS = {"instruction": "You are the speaker. Symbols: red green blue yellow.", "prompt": "Round 1 of 2. Target: blue"}
LISTENER_OBS = {"instruction": "You are the listener.", "prompt": "Round 1 of 2. Message: green"}
LORA = LoraSettings(r=4, alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "lm_head"])
ENV_VAR = "VLLM_ALLOW_INSECURE_SERIALIZATION"


def unversioned(lora_name):
    """The policy a versioned adapter name (``<policy>-v<N>``) belongs to; None stays None."""
    return None if lora_name is None else lora_name.rsplit("-v", 1)[0]


@pytest.fixture
def make_fake(monkeypatch):
    """Install a fresh fake ``vllm`` (options: see :class:`fake_vllm.FakeVLLM`)."""
    # the engine sets this variable for full-weight pushes; start without it, restore afterwards
    monkeypatch.setenv(ENV_VAR, "1")
    monkeypatch.delenv(ENV_VAR)
    return lambda **options: fake_vllm.install(monkeypatch, **options)


@pytest.fixture
def fake(make_fake):
    return make_fake()


def settings(tmp_path, **kwargs) -> VLLMConfig:
    base = {"max_model_len": 256, "gpu_memory_utilization": 0.4, "enforce_eager": True, "max_lora_rank": 8,
            "adapter_dir": str(tmp_path / "adapters")}
    return VLLMConfig(**{**base, **kwargs})


def l2_policies(model_dir):
    return build_policies("L2", ["speaker", "listener"], model_dir, device="cpu", lora=LORA)


def perturb(policy, seed: int, scale: float, only: str | None = None) -> None:
    """Move a policy's trainable weights (its LoRA B matrices with ``only="lora_B"``) as an update would."""
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for name, p in policy.named_trainable_parameters():
            if only is None or only in name:
                p.add_(torch.randn_like(p) * scale)


def hf_logprobs(policy, prompt, completions, temperature: float = 1.0) -> list[torch.Tensor]:
    batch = pack_sequences([prompt] * len(completions), completions, policy.tokenizer.pad_token_id)
    with torch.no_grad(), policy.activated() as model:
        lp, _ = completion_logprobs(model, batch, temperature=temperature)
    return [lp[i, : len(c)] for i, c in enumerate(completions)]


def max_gap(policy, prompt, row, temperature: float = 1.0) -> float:
    """Largest |engine log-prob − policy log-prob| over the sampled tokens of one prompt's row."""
    expected = hf_logprobs(policy, prompt, [g.token_ids for g in row], temperature)
    return max(float((torch.tensor(g.logprobs) - e).abs().max()) for g, e in zip(row, expected))


def probe_logprobs(llm, prompt, lora_request) -> torch.Tensor:
    """The fake's prompt log-probs of ``prompt`` under ``lora_request`` (what the engine's check reads)."""
    sp = fake_vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
    res = llm.generate([{"prompt_token_ids": prompt}], sp, lora_request=[lora_request], use_tqdm=False)[0]
    return torch.tensor(vllm_mod._prompt_logprobs(res.prompt_logprobs, prompt)[1:])


def reference_probe(policy, prompt) -> torch.Tensor:
    return hf_logprobs(policy, prompt[:1], [prompt[1:]])[0]


# ---------------------------------------------------------------------------- sampling
@pytest.mark.parametrize("level,temperature", [("L1", 1.0), ("L2", 0.7)])
def test_sampled_logprobs_match_the_policy_and_each_prompt_gets_its_agents_adapter(
        fake, tiny_model_dir, tmp_path, level, temperature):
    if level == "L1":
        ps = build_policies("L1", ["speaker", "listener"], tiny_model_dir, device="cpu")
        names = ["shared"] * 4
    else:
        ps = l2_policies(tiny_model_dir)
        perturb(ps["speaker"], 1, 0.3, only="lora_B")  # distinct adapters, pushed by the initial sync
        perturb(ps["listener"], 2, 0.3, only="lora_B")
        names = ["speaker", "listener", "speaker", "listener"]
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(temperature=temperature, max_new_tokens=5), seed=3,
                                 settings=settings(tmp_path))
    (llm,) = fake.llms  # L1 and L2: one engine (under L2 it serves every adapter)
    assert llm.args.logprobs_mode == "processed_logprobs"
    p_s, p_l = engine.encode(names[0], SPEAKER_OBS), engine.encode(names[1], LISTENER_OBS)
    requests = list(zip(names, [p_s, p_l, p_l, p_s]))
    rows = engine.generate_multi(requests, n=3)
    for (policy, prompt), row in zip(requests, rows):
        assert len(row) == 3 and all(len(g.logprobs) == len(g.token_ids) > 0 for g in row)
        assert max_gap(ps[policy], prompt, row, temperature) < 1e-4

    (call,) = [e[1] for e in llm.calls("generate") if e[1]["prompt_logprobs"][0] is None]
    if level == "L1":
        assert call["lora_names"] == [None] * 4
    else:
        assert [unversioned(n) for n in call["lora_names"]] == names  # each prompt carries its agent's LoRARequest
        assert call["lora_ids"] == [engine.served[n].lora_id for n in names]
        # the adapters really differ: the speaker's samples are not the listener's log-probs
        assert max_gap(ps["listener"], p_s, rows[0], temperature) > 1e-2
    # one seed per request, children seed + 0..n-1: disjoint streams
    seeds = call["seeds"]
    assert all(b - a == 3 for a, b in zip(seeds, seeds[1:]))


def test_identical_prompts_in_one_batch_are_sampled_independently(fake, tiny_model_dir, tmp_path):
    """vLLM seeds a generator per request: one seed for the whole batch would give every episode
    playing the same problem the same completions."""
    ps = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=4), seed=0, settings=settings(tmp_path))
    prompt = engine.encode("shared", SPEAKER_OBS)
    rows = engine.generate("shared", [prompt] * 6, n=2)
    per_request = [tuple(tuple(g.token_ids) for g in row) for row in rows]
    assert len(set(per_request)) == 6
    assert len({g for row in per_request for g in row}) > 6


def test_greedy_and_truncated_sampling_map_to_vllm_parameters(fake, tiny_model_dir, tmp_path):
    ps = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(temperature=0.0, top_k=5, top_p=0.5, max_new_tokens=4),
                                 settings=settings(tmp_path))
    prompt = engine.encode("shared", SPEAKER_OBS)
    row = engine.generate("shared", [prompt], n=3)[0]
    assert row[0].token_ids == row[1].token_ids == row[2].token_ids  # greedy: truncation reset
    assert max_gap(ps["shared"], prompt, row) < 1e-4  # greedy log-probs are of the untempered policy
    # with top-k the reported log-probs are vLLM's processed ones: of the truncated distribution
    row = engine.generate("shared", [prompt], n=4, sampling=SamplingParams(top_k=3, max_new_tokens=4))[0]
    expected = hf_logprobs(ps["shared"], prompt, [g.token_ids for g in row])
    assert all((torch.tensor(g.logprobs) >= e - 1e-5).all() for g, e in zip(row, expected))
    assert any((torch.tensor(g.logprobs) > e + 1e-3).any() for g, e in zip(row, expected))


# ---------------------------------------------------------------------------- adapter push
@pytest.mark.parametrize("load_inplace", [False, True], ids=["vllm-without-load-inplace", "vllm-with-load-inplace"])
def test_sync_pushes_only_the_adapter_resets_the_prefix_cache_and_serves_the_update(
        make_fake, tiny_model_dir, tmp_path, load_inplace):
    """Every version of an adapter gets a fresh id and name (the old one removed), whether or not
    vLLM offers ``load_inplace``: a fresh id is what the real vLLM (tests/vllm) was checked with."""
    fake = make_fake(load_inplace=load_inplace)
    ps = l2_policies(tiny_model_dir)
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=4), seed=1, settings=settings(tmp_path))
    (llm,) = fake.llms
    assert llm.args.enable_lora and llm.args.max_loras == 2 and llm.args.max_lora_rank == 8
    before = {n: (engine.served[n].lora_id, engine.served[n].lora_path) for n in ("speaker", "listener")}
    assert before["speaker"][0] != before["listener"][0]
    prompt = engine.encode("speaker", SPEAKER_OBS)
    engine.generate_multi([("speaker", prompt), ("listener", prompt)], n=2)  # adapters loaded, prefix cached

    perturb(ps["speaker"], 5, 0.3, only="lora_B")
    mark = len(llm.events)
    push = engine.sync(["speaker"])
    events = llm.events[mark:]
    kinds = [e[0] for e in events]
    assert "collective_rpc" not in kinds and push["weight_push_bytes"] > 0  # only the adapter moves
    speaker = engine.served["speaker"]
    old_id, old_path = before["speaker"]
    assert speaker.lora_id not in {old_id, before["listener"][0]}  # a fresh id
    assert ("remove_lora", old_id) in events and "add_lora" not in kinds
    registered = kinds.index("remove_lora")
    assert registered < kinds.index("reset_prefix_cache")  # the cache is reset after the change
    assert speaker.lora_path != old_path and (Path(speaker.lora_path) / "adapter_model.safetensors").is_file()
    assert not Path(old_path).exists()
    assert (engine.served["listener"].lora_id, engine.served["listener"].lora_path) == before["listener"]
    assert speaker.checked  # the first changed adapter was checked (and vLLM applies it)

    rows = engine.generate_multi([("speaker", prompt), ("listener", prompt)], n=3)
    assert max_gap(ps["speaker"], prompt, rows[0]) < 1e-4
    assert max_gap(ps["listener"], prompt, rows[1]) < 1e-4


def test_vllm_caches_adapters_by_id_so_a_reused_id_serves_stale_weights(fake, tiny_model_dir, tmp_path):
    """Why the engine registers an updated adapter under a fresh id (or reloads it in place)."""
    ps = l2_policies(tiny_model_dir)
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=2), settings=settings(tmp_path))
    (llm,) = fake.llms
    pol = ps["speaker"]
    probe = engine.encode("speaker", SPEAKER_OBS)
    old = reference_probe(pol, probe)
    served = engine.served["speaker"]
    first = probe_logprobs(llm, probe, fake.LoRARequest("speaker", served.lora_id, served.lora_path))
    assert torch.allclose(first, old, atol=1e-4)

    perturb(pol, 7, 0.3, only="lora_B")
    new = reference_probe(pol, probe)
    new_dir = pol.save_pretrained(tmp_path / "updated")
    same_id = probe_logprobs(llm, probe, fake.LoRARequest("speaker", served.lora_id, str(new_dir)))
    assert torch.allclose(same_id, old, atol=1e-4) and not torch.allclose(same_id, new, atol=1e-2)  # stale
    fresh_id = probe_logprobs(llm, probe, fake.LoRARequest("speaker", 99, str(new_dir)))
    assert torch.allclose(fresh_id, new, atol=1e-4)


def test_each_adapter_version_has_its_own_prefix_cache_key(fake, tiny_model_dir, tmp_path):
    """vLLM keys cached prompt KV by the adapter's name: the prompt KV of an old version under the
    same name would serve the update. Each version is registered under a new name
    (``<policy>-v<N>``), so the update is served right even where the reset (which the engine
    still asks for) did nothing; under the old version's name the stale KV shows."""
    ps = l2_policies(tiny_model_dir)
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=3), seed=2, settings=settings(tmp_path))
    (llm,) = fake.llms
    prompt = engine.encode("speaker", SPEAKER_OBS)
    engine.generate("speaker", [prompt])  # the prompt's KV, under the speaker's current name, is cached
    old_name = engine._lora_request(engine.served["speaker"]).lora_name
    skipped = []
    llm.reset_prefix_cache = lambda device=None: skipped.append(1) or True  # the reset, suppressed
    perturb(ps["speaker"], 3, 0.3, only="lora_B")
    engine.sync(["speaker"])
    assert skipped  # the engine asked for the reset ...
    assert engine._lora_request(engine.served["speaker"]).lora_name != old_name
    assert max_gap(ps["speaker"], prompt, engine.generate("speaker", [prompt], n=2)[0]) < 1e-4  # ... not needed
    served = engine.served["speaker"]
    reused = fake.LoRARequest(old_name, served.lora_id, served.lora_path)  # the new weights, the old name
    out = llm.generate([{"prompt_token_ids": prompt}], fake_vllm.SamplingParams(max_tokens=3, logprobs=0, seed=5),
                       lora_request=[reused], use_tqdm=False)[0].outputs[0]
    stale = [type("G", (), {"token_ids": list(out.token_ids),
                            "logprobs": [d[t].logprob for d, t in zip(out.logprobs, out.token_ids)]})()]
    assert max_gap(ps["speaker"], prompt, stale) > 1e-3


# ---------------------------------------------------------------------------- first-sync check
def test_first_sync_check_stops_a_run_whose_adapter_vllm_ignores(make_fake, tiny_model_dir, tmp_path):
    """A served model whose module paths differ from the adapter's (a multimodal wrapper's
    ``language_model.`` prefix) loads the adapter and silently serves the base model (vllm#34186)."""
    fake = make_fake(module_prefix="language_model.")
    ps = l2_policies(tiny_model_dir)
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=2), settings=settings(tmp_path))
    assert not engine.served["speaker"].checked  # LoRA B = 0: nothing to check yet
    perturb(ps["speaker"], 4, 0.3, only="lora_B")
    with pytest.raises(RuntimeError, match=r"vLLM does not apply adapter 'speaker'.*module-name mismatch"):
        engine.sync(["speaker"])
    assert fake.events("load_lora")  # it was loaded, and did nothing


def test_first_sync_check_waits_for_a_changed_adapter_and_runs_once(fake, tiny_model_dir, tmp_path):
    ps = l2_policies(tiny_model_dir)
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=2), settings=settings(tmp_path))
    (llm,) = fake.llms

    def probes():
        return [[unversioned(n) for n in e[1]["lora_names"]] for e in llm.calls("generate")
                if e[1]["prompt_logprobs"] != [None]]

    engine.sync(["speaker"])  # unchanged adapter: equal to the base model, nothing to compare
    assert probes() == [] and not engine.served["speaker"].checked
    perturb(ps["speaker"], 6, 0.3, only="lora_B")
    engine.sync(["speaker"])
    assert probes() == [["speaker"]] and engine.served["speaker"].checked
    perturb(ps["speaker"], 7, 0.3, only="lora_B")
    engine.sync(["speaker"])
    assert probes() == [["speaker"]]  # checked once


@pytest.mark.parametrize("prefix", ["", "language_model."])
def test_evaluation_agent_with_a_trained_adapter_is_checked_at_start(make_fake, tiny_model_dir, tmp_path, prefix):
    from llm_envs.agents.base import ActRequest

    fake = make_fake(module_prefix=prefix)
    trained = l2_policies(tiny_model_dir)["listener"]
    perturb(trained, 8, 0.3, only="lora_B")
    adapter_dir = trained.save_pretrained(tmp_path / "final" / "listener")
    if prefix:
        with pytest.raises(RuntimeError, match="does not apply adapter"):
            vllm_mod.VLLMAgent.from_pretrained(str(adapter_dir), settings=settings(tmp_path))
        return
    agent = vllm_mod.VLLMAgent.from_pretrained(str(adapter_dir), settings=settings(tmp_path),
                                               sampling=SamplingParams(max_new_tokens=3))
    assert agent.engine.served["shared"].checked
    out = agent.act_batch([ActRequest(LISTENER_OBS, "listener")])[0]
    assert out.error is None and out.token_ids
    expected = hf_logprobs(trained, out.prompt_token_ids, [out.token_ids])[0]
    assert torch.allclose(torch.tensor(out.logprobs), expected, atol=1e-4)
    assert [unversioned(n) for n in fake.events("generate")[-1][1]["lora_names"]] == ["shared"]
    agent.close()


# ---------------------------------------------------------------------------- full weights
@pytest.mark.parametrize("level", ["L1", "L3"])
def test_full_weight_sync_goes_through_the_worker_extension(fake, tiny_model_dir, tmp_path, level):
    ps = build_policies(level, ["speaker", "listener"], tiny_model_dir, device="cpu")
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=4), seed=4, settings=settings(tmp_path))
    assert len(fake.llms) == len(ps.modules())  # one engine per distinct model
    for llm in fake.llms:
        assert llm.args.worker_extension_cls == vllm_mod.WORKER_EXTENSION and not llm.args.enable_lora
        assert llm.args.gpu_memory_utilization == pytest.approx(0.4 / len(fake.llms))
    assert os.environ[ENV_VAR] == "1"
    name = ps.names()[0]
    pol = ps[name]
    target = fake.llms[0]
    prompt = engine.encode(name, SPEAKER_OBS)
    engine.generate(name, [prompt])
    perturb(pol, 9, 0.05)
    assert max_gap(pol, prompt, engine.generate(name, [prompt], n=2)[0]) > 1e-3  # the engine has its own copy
    marks = [len(llm.events) for llm in fake.llms]
    push = engine.sync([name])
    assert push["weight_push_bytes"] == sum(p.numel() * p.element_size() for p in pol.model.parameters())
    kinds = [e[0] for e in target.events[marks[0]:]]
    assert kinds[:3] == ["collective_rpc", "load_weights", "reset_prefix_cache"]
    (loaded,) = target.calls("load_weights")
    assert set(loaded[1]) == {n for n, _ in pol.model.named_parameters()}
    for llm, mark in zip(fake.llms[1:], marks[1:]):
        assert llm.events[mark:] == []  # the other policy's engine is untouched
    assert max_gap(pol, prompt, engine.generate(name, [prompt], n=3)[0]) < 1e-4


# ---------------------------------------------------------------------------- merged LoRA serving
def reference_gap(policy, prompt, row) -> float:
    """Largest |engine log-prob − base-model log-prob| (the policy's adapter off)."""
    batch = pack_sequences([prompt] * len(row), [g.token_ids for g in row], policy.tokenizer.pad_token_id)
    with torch.no_grad(), policy.reference() as model:
        lp, _ = completion_logprobs(model, batch)
    return max(float((torch.tensor(g.logprobs) - lp[i, : len(g.token_ids)]).abs().max()) for i, g in enumerate(row))


def test_merged_serving_gives_each_lora_policy_an_engine_with_its_adapter_merged_in(fake, tiny_model_dir, tmp_path):
    """``lora_serving: merged`` (the CPU build's default): one engine per LoRA policy, no LoRA in
    vLLM, each update pushed as the base weights plus that policy's ``s·B·A``; what is sampled is
    the learner's policy, adapter for adapter, and ``<policy>@base`` gets a base-model engine."""
    ps = l2_policies(tiny_model_dir)
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=4), seed=2,
                                 settings=settings(tmp_path, lora_serving="merged"))
    assert len(fake.llms) == 2 and not any(llm.args.enable_lora for llm in fake.llms)
    assert all(llm.args.gpu_memory_utilization == pytest.approx(0.2) for llm in fake.llms)
    assert fake.events("load_weights") == []  # adapters at their start (B = 0) equal the base model: nothing pushed
    perturb(ps["speaker"], 5, 0.3, only="lora_B")
    perturb(ps["listener"], 6, 0.3, only="lora_B")
    push = engine.sync(["speaker", "listener"])
    assert push["weight_push_bytes"] > 0 and len(fake.events("load_weights")) == 2
    assert all(engine.served[n].merged and engine.served[n].checked and engine.served[n].version == 1
               for n in ("speaker", "listener"))
    p_s, p_l = engine.encode("speaker", SPEAKER_OBS), engine.encode("listener", LISTENER_OBS)
    rows = engine.generate_multi([("speaker", p_s), ("listener", p_l), ("listener", p_s)], n=3)
    assert max_gap(ps["speaker"], p_s, rows[0]) < 1e-4
    assert max_gap(ps["listener"], p_l, rows[1]) < 1e-4
    assert max_gap(ps["listener"], p_s, rows[2]) < 1e-4
    assert max_gap(ps["speaker"], p_s, rows[2]) > 1e-2  # the two engines really serve different adapters
    assert all(call[1]["lora_names"] == [None] * len(call[1]["lora_names"]) for call in fake.events("generate"))
    base = engine.base_policy("speaker")
    assert len(fake.llms) == 3  # the merged engines cannot serve the base model: it gets its own
    row = engine.generate(base, [p_s], n=3)[0]
    assert reference_gap(ps["speaker"], p_s, row) < 1e-4
    assert max_gap(ps["speaker"], p_s, row) > 1e-2
    engine.base_policy("listener")
    assert len(fake.llms) == 3  # the two policies share a base model, and its engine


def test_a_trained_adapter_is_merged_and_checked_when_the_engine_starts(fake, tiny_model_dir, tmp_path):
    ps = l2_policies(tiny_model_dir)
    perturb(ps["speaker"], 7, 0.3, only="lora_B")  # e.g. the warm start's adapter
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=4), seed=2,
                                 settings=settings(tmp_path, lora_serving="merged"))
    assert len(fake.events("load_weights")) == 1 and engine.served["speaker"].checked
    assert not engine.served["listener"].checked  # still the base model: checked once it changes
    prompt = engine.encode("speaker", SPEAKER_OBS)
    assert max_gap(ps["speaker"], prompt, engine.generate("speaker", [prompt], n=3)[0]) < 1e-4


def test_merged_weights_equal_peft_with_the_adapter_on_and_refuse_what_they_cannot_merge(tiny_model_dir, tmp_path):
    from llm_trainers.policies import load_causal_lm

    ps = l2_policies(tiny_model_dir)
    pol = ps["listener"]
    perturb(pol, 3, 0.3)  # A and B both moved
    before = {n: p.detach().clone() for n, p in pol.model.named_parameters()}
    merged = dict(vllm_mod.merged_weights(pol, pol.trainable_state_dict()))
    assert all(torch.equal(before[n], p) for n, p in pol.model.named_parameters())  # the learner is untouched
    plain = load_causal_lm(tiny_model_dir, device="cpu", dtype=torch.float32)
    assert set(merged) == {n for n, _ in plain.named_parameters()}
    plain.load_state_dict(merged, strict=False)
    ids = torch.tensor([pol.tokenizer.encode("the speaker names a symbol red green")])
    with torch.no_grad(), pol.activated() as model:
        expected = model(input_ids=ids).logits
    with torch.no_grad():
        got = plain(input_ids=ids).logits
        assert (got - expected).abs().max() < 1e-4
        with pol.reference() as model:
            assert (model(input_ids=ids).logits - expected).abs().max() > 1e-2  # the adapter matters

    state = pol.trainable_state_dict()
    dropped = next(k for k in state if ".lora_B." in k)
    with pytest.raises(ValueError, match="lacks A or B"):
        vllm_mod.merged_weights(pol, {k: v for k, v in state.items() if k != dropped})
    with pytest.raises(ValueError, match="linear layers only"):  # e.g. DoRA
        vllm_mod.merged_weights(pol, {**state, "base_model.model.lm_head.lora_magnitude_vector.listener": state[dropped]})
    with pytest.raises(ValueError, match="not a LoRA A/B"):  # another adapter's weight
        vllm_mod.merged_weights(pol, {**state, "base_model.model.lm_head.lora_A.speaker.weight": state[dropped]})

    from llm_trainers.tiny import build_tiny_model

    tied = build_tiny_model(tmp_path / "tied", ["the speaker names a symbol"], tie_word_embeddings=True)
    tps = build_policies("L2", ["a", "b"], str(tied), device="cpu", lora=LORA)  # LORA adapts lm_head
    perturb(tps["a"], 4, 0.3)
    with pytest.raises(ValueError, match="cannot merge"):
        vllm_mod.merged_weights(tps["a"], tps["a"].trainable_state_dict())


def test_lora_serving_is_validated(tmp_path):
    with pytest.raises(ValueError, match="lora_serving"):
        load_config(None, ["env.id=llm/Signalling-v0", "rollout.vllm={lora_serving: merge}"]).validate()


def test_sleep_mode_frees_the_engine_during_updates_and_wakes_for_work(fake, tiny_model_dir, tmp_path):
    ps = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=2), settings=settings(tmp_path, sleep=True))
    (llm,) = fake.llms
    assert llm.args.enable_sleep_mode
    prompt = engine.encode("shared", SPEAKER_OBS)
    engine.offload()
    engine.offload()
    assert llm.calls("sleep") == [("sleep", 1)]
    with pytest.raises(RuntimeError, match="sleeps"):  # the fake refuses work while asleep
        llm.generate([{"prompt_token_ids": prompt}], fake_vllm.SamplingParams())
    perturb(ps["shared"], 10, 0.05)
    engine.sync()
    kinds = [e[0] for e in llm.events]
    assert kinds.index("wake_up") < kinds.index("collective_rpc")
    engine.offload()
    assert max_gap(ps["shared"], prompt, engine.generate("shared", [prompt], n=2)[0]) < 1e-4  # woken again


# ---------------------------------------------------------------------------- lifecycle
def test_engine_state_round_trip_replays_the_same_samples(fake, tiny_model_dir, tmp_path):
    ps = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
    engine = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=4), seed=5, settings=settings(tmp_path))
    prompt = engine.encode("shared", SPEAKER_OBS)
    engine.generate("shared", [prompt], n=2)
    buf = io.BytesIO()
    torch.save(engine.state_dict(), buf)  # as a checkpoint stores it
    first = [g.token_ids for g in engine.generate("shared", [prompt], n=4)[0]]
    other = vllm_mod.VLLMEngine(ps, SamplingParams(max_new_tokens=4), seed=6, settings=settings(tmp_path))
    buf.seek(0)
    other.load_state_dict(torch.load(buf, weights_only=False))
    assert [g.token_ids for g in other.generate("shared", [prompt], n=4)[0]] == first


def test_engines_and_views_keep_their_adapters_to_themselves(fake, tiny_model_dir, tmp_path):
    """A trainer's engine and an evaluation engine in one process both serve a policy "shared"."""
    cfg = settings(tmp_path)
    one = vllm_mod.VLLMEngine(build_policies("L1", ["a"], tiny_model_dir, device="cpu", lora=LORA), settings=cfg)
    two = vllm_mod.VLLMEngine(build_policies("L1", ["a"], tiny_model_dir, device="cpu", lora=LORA), settings=cfg)
    prompt = one.encode("shared", SPEAKER_OBS)
    one.view(seed=1).close()  # closing a view leaves the engine alone
    one.generate("shared", [prompt])
    two.close()
    one.sync()
    one.generate("shared", [prompt])  # adapters load lazily: they must still be on disk
    assert one.served["shared"].lora_path != two.served["shared"].lora_path
    root = Path(one.served["shared"].lora_path).parents[1]  # <adapter root>/<policy>/v<N>
    one.close()
    assert not root.exists() and os.listdir(cfg.adapter_dir) == []


def test_max_lora_rank_is_one_vllm_accepts(fake, tiny_model_dir, tmp_path):
    lora = LoraSettings(r=12, alpha=24, target_modules=["q_proj", "v_proj"])
    ps = build_policies("L1", ["a"], tiny_model_dir, device="cpu", lora=lora)
    vllm_mod.VLLMEngine(ps, settings=settings(tmp_path, max_lora_rank=4))
    assert fake.llms[0].args.max_lora_rank == 16
    with pytest.raises(ValueError, match="exceeds"):
        vllm_mod._vllm_max_lora_rank(1024)


# ---------------------------------------------------------------------------- the trainer
@pytest.mark.parametrize("level", ["L1", "L2"])
def test_trainer_runs_with_the_vllm_engine(fake, tiny_model_dir, tmp_path, level):
    from llm_trainers.trainer import Trainer

    overrides = [
        "env.id=llm/Signalling-v0", "env.kwargs={rounds: 2}", "env.num_envs=4", f"model.path={tiny_model_dir}",
        "model.device=cpu", f"model.level={level}", "rollout.engine=vllm", "rollout.k=4", "rollout.max_new_tokens=2",
        f"rollout.vllm={{max_model_len: 256, gpu_memory_utilization: 0.4, adapter_dir: {tmp_path / 'adapters'}}}",
        "run.steps=2", "run.eval_every=2", "run.eval_at_start=false", "run.eval_episodes=4", "run.save_every=-1",
        "run.progress=false", "run.tensorboard=false", "run.export_final=false", f"run.output_dir={tmp_path / 'run'}",
        "train.lr=5e-2", "train.micro_batch_size=32",
    ]
    if level == "L2":
        overrides.append("model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}")
    trainer = Trainer(load_config(None, overrides))
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["push/weight_push_bytes"] > 0 and r["tokens/generated"] > 0 for r in rows)
    assert "eval/success" in rows[-1]
    (llm,) = fake.llms
    names = {unversioned(n) for e in llm.calls("generate") for n in e[1]["lora_names"]}
    if level == "L1":
        assert names == {None} and len(llm.calls("load_weights")) == 2  # one full push per step
    else:
        assert names == {"speaker", "listener"} and not llm.calls("collective_rpc")
        assert all(s.checked for s in trainer.engine.served.values())  # trained adapters, verified
    assert len(llm.calls("reset_prefix_cache")) >= 2
    trainer.close()
    assert os.listdir(tmp_path / "adapters") == []
