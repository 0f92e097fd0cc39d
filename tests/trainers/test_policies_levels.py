"""L1 / L2 / L3 policies: what trains, what stays frozen, and the reference policy."""

from __future__ import annotations

import pytest
import torch

from llm_trainers.config import TrainConfig
from llm_trainers.learner import Learner, UpdateSample
from llm_trainers.policies import LoraSettings, build_policies

AGENTS = ["speaker", "listener"]
LORA = LoraSettings(r=4, alpha=8)


def _samples(policy, n=4, seed=0):
    """Random on-policy-looking samples with non-zero advantages."""
    g = torch.Generator().manual_seed(seed)
    tok = policy.tokenizer
    out = []
    for i in range(n):
        prompt = tok.apply_chat_template([{"role": "user", "content": "Round 1 of 1. Target: red"}],
                                         add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
        completion = torch.randint(7, len(tok), (3,), generator=g).tolist()
        adv = torch.full((3,), 1.0 if i % 2 == 0 else -1.0)
        out.append(UpdateSample(prompt, completion, adv, torch.zeros(3)))
    return out


def _with_old_logprobs(learner, policy_name, samples):
    old = learner.logprobs(policy_name, [s.prompt_ids for s in samples], [s.completion_ids for s in samples])
    for s, lp in zip(samples, old):
        s.old_logprobs = lp
    return samples


def _snapshot(named):
    return {n: p.detach().clone() for n, p in named}


def _changed(before, named):
    now = dict(named)
    return {n for n, t in before.items() if not torch.equal(t, now[n].detach())}


def test_l1_maps_every_agent_to_one_shared_policy(tiny_model_dir):
    ps = build_policies("L1", AGENTS, tiny_model_dir, device="cpu")
    assert ps.names() == ["shared"]
    assert ps.for_agent("speaker") is ps.for_agent("listener")
    assert ps.for_agent("speaker").adapter is None
    with pytest.raises(ValueError):
        build_policies("L1", AGENTS, tiny_model_dir, device="cpu", policy_map={"speaker": "a", "listener": "b"})


def test_l2_each_adapter_moves_only_from_its_own_records(tiny_model_dir):
    ps = build_policies("L2", AGENTS, tiny_model_dir, lora=LORA, device="cpu")
    assert ps.names() == AGENTS and len(ps.modules()) == 1
    spk, lis = ps["speaker"], ps["listener"]
    spk_names = {n for n, _ in spk.named_trainable_parameters()}
    lis_names = {n for n, _ in lis.named_trainable_parameters()}
    assert spk_names and lis_names and not (spk_names & lis_names)
    all_before = _snapshot(spk.model.named_parameters())

    learner = Learner(ps, TrainConfig(lr=1e-2, micro_batch_size=2))
    learner.update("speaker", _with_old_logprobs(learner, "speaker", _samples(spk)))
    changed = _changed(all_before, spk.model.named_parameters())
    # lora_B starts at zero so only B moves on the first step; every changed weight is the speaker's
    assert changed and changed <= spk_names
    assert all(".lora_B." in n for n in changed)
    # the listener adapter saw no gradient at all (its adapter was not in the graph)
    assert all(p.grad is None for p in lis.trainable_parameters())

    learner.update("speaker", _with_old_logprobs(learner, "speaker", _samples(spk, seed=1)))
    learner.update("listener", _with_old_logprobs(learner, "listener", _samples(lis, seed=2)))
    learner.update("listener", _with_old_logprobs(learner, "listener", _samples(lis, seed=3)))
    changed = _changed(all_before, spk.model.named_parameters())
    # after two steps each, every weight of *both* adapters has changed and no base weight did
    assert changed == spk_names | lis_names


def test_l2_adapter_update_is_independent_of_other_agents_data(tiny_model_dir):
    """The speaker adapter after an update is bit-identical whether or not the listener trained."""
    results = []
    for train_listener in (False, True):
        ps = build_policies("L2", AGENTS, tiny_model_dir, lora=LORA, device="cpu")
        learner = Learner(ps, TrainConfig(lr=1e-2, micro_batch_size=2), seed=0)
        for step in range(2):
            if train_listener:
                learner.update("listener", _with_old_logprobs(learner, "listener", _samples(ps["listener"], seed=10 + step)))
            learner.update("speaker", _with_old_logprobs(learner, "speaker", _samples(ps["speaker"], seed=step)))
        results.append(ps["speaker"].trainable_state_dict())
    assert results[0].keys() == results[1].keys()
    assert all(torch.equal(results[0][k], results[1][k]) for k in results[0])


def test_l2_reference_is_base_model_with_adapters_disabled(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    ps = build_policies("L2", AGENTS, tiny_model_dir, lora=LORA, device="cpu")
    spk = ps["speaker"]
    learner = Learner(ps, TrainConfig(lr=5e-2, micro_batch_size=4))
    samples = _samples(spk)
    for seed in range(3):
        learner.update("speaker", _with_old_logprobs(learner, "speaker", _samples(spk, seed=seed)))
    prompts, comps = [s.prompt_ids for s in samples], [s.completion_ids for s in samples]
    ref = learner.logprobs("speaker", prompts, comps, reference=True)
    cur = learner.logprobs("speaker", prompts, comps)

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    from llm_trainers.batching import completion_logprobs, pack_sequences

    with torch.no_grad():
        lp, _ = completion_logprobs(base, pack_sequences(prompts, comps, spk.tokenizer.pad_token_id))
    for i, r in enumerate(ref):
        assert torch.allclose(r, lp[i, : len(r)], atol=1e-5)
    assert any(not torch.allclose(r, c, atol=1e-4) for r, c in zip(ref, cur))


def test_l3_models_are_separate(tiny_model_dir):
    ps = build_policies("L3", AGENTS, tiny_model_dir, device="cpu", need_reference=True)
    assert len(ps.modules()) == 2
    spk, lis = ps["speaker"], ps["listener"]
    lis_before = lis.trainable_state_dict()
    ref_before = {n: p.detach().clone() for n, p in spk.ref_model.named_parameters()}
    learner = Learner(ps, TrainConfig(lr=1e-2, micro_batch_size=4))
    spk_before = spk.trainable_state_dict()
    learner.update("speaker", _with_old_logprobs(learner, "speaker", _samples(spk)))
    spk_after = spk.trainable_state_dict()
    assert any(not torch.equal(spk_before[k], spk_after[k]) for k in spk_before)
    lis_after = lis.trainable_state_dict()
    assert all(torch.equal(lis_before[k], lis_after[k]) for k in lis_before)
    # full fine-tuning keeps a frozen reference copy that does not move
    assert all(torch.equal(p, ref_before[n]) for n, p in spk.ref_model.named_parameters())


@pytest.mark.parametrize(("level", "paths", "policy_map", "message"), [
    ("L3", {"listner": "/nowhere"}, None, r"model.paths names no policy: \['listner'\]"),
    # under a policy map the policies are named by it, not by the agents
    ("L3", {"listener": "/nowhere"}, {"speaker": "a", "listener": "b"}, r"names no policy: \['listener'\]"),
    ("L1", {"shared": "/nowhere"}, None, r"level L3 only, not L1"),
    ("L2", {"listener": "/nowhere"}, None, r"level L3 only, not L2"),
])
def test_model_paths_no_policy_reads_are_refused(tiny_model_dir, level, paths, policy_map, message):
    # Each was accepted before: the named policy (or every policy) loaded model_path instead.
    lora = LoraSettings(r=4, alpha=8) if level == "L2" else None
    with pytest.raises(ValueError, match=message):
        build_policies(level, AGENTS, tiny_model_dir, device="cpu", model_paths=paths, policy_map=policy_map,
                       lora=lora)


def test_model_paths_below_l3_are_refused_by_the_config():
    from llm_trainers.config import load_config

    with pytest.raises(ValueError, match="only level L3 loads"):
        load_config(None, ["model.level=L1", "model.paths={listener: /nowhere}"])


def test_l2_requires_lora_and_reference_needs_building(tiny_model_dir):
    with pytest.raises(ValueError):
        build_policies("L2", AGENTS, tiny_model_dir, device="cpu")
    ps = build_policies("L1", AGENTS, tiny_model_dir, device="cpu")
    with pytest.raises(RuntimeError), ps["shared"].reference():
        pass


def test_adapter_save_and_reload_roundtrip(tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ps = build_policies("L2", AGENTS, tiny_model_dir, lora=LORA, device="cpu")
    learner = Learner(ps, TrainConfig(lr=1e-2, micro_batch_size=4))
    for seed in range(2):
        learner.update("listener", _with_old_logprobs(learner, "listener", _samples(ps["listener"], seed=seed)))
    out = ps["listener"].save_pretrained(tmp_path / "listener")
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    loaded = PeftModel.from_pretrained(base, str(out)).eval()
    samples = _samples(ps["listener"])
    from llm_trainers.batching import completion_logprobs, pack_sequences

    batch = pack_sequences([s.prompt_ids for s in samples], [s.completion_ids for s in samples], 0)
    with torch.no_grad():
        lp_loaded, _ = completion_logprobs(loaded, batch)
    lp_policy = learner.logprobs("listener", [s.prompt_ids for s in samples], [s.completion_ids for s in samples])
    for i, lp in enumerate(lp_policy):
        assert torch.allclose(lp, lp_loaded[i, : len(lp)], atol=1e-5)


def test_a_lora_dropout_that_would_be_ignored_is_refused(tiny_model_dir):
    """Dropout is off in the whole model (deterministic log-probabilities), so lora.dropout > 0
    would be written to adapter_config.json and never applied: refused, in the config and in
    build_policies."""
    from llm_trainers.config import load_config

    with pytest.raises(ValueError, match=r"model.lora.dropout must be 0, got 0.5"):
        load_config("plan_path_at_grpo_l2", ["model.lora.dropout=0.5"])
    with pytest.raises(ValueError, match="dropout must be 0"):
        build_policies("L2", AGENTS, tiny_model_dir, lora=LoraSettings(r=4, alpha=8, dropout=0.5), device="cpu")
    load_config("plan_path_at_grpo_l2", ["model.lora.dropout=0"])  # 0 stays valid


def test_building_lora_policies_warns_nothing(tiny_model_dir):
    """No FutureWarning on every run from wrapping the model in peft (peft reads a deprecated
    transformers attribute; llm_trainers.policies hides that one warning)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_policies("L2", AGENTS, tiny_model_dir, lora=LORA, device="cpu")
    assert [str(w.message) for w in caught if issubclass(w.category, FutureWarning)] == []
