"""Hugging Face generation: batching with left padding, chat template, sampling, log-probs."""

from __future__ import annotations

import pytest
import torch

from llm_envs.agents.base import ActRequest
from llm_trainers.agents.hf import HFAgent, HFEngine, SamplingParams, encode_observation
from llm_trainers.batching import completion_logprobs, pack_sequences
from llm_trainers.policies import build_policies

OBS = [
    {"instruction": "You are the speaker. Symbols: red green blue yellow.", "prompt": "Round 1 of 2. Target: blue"},
    {"instruction": "", "prompt": "Message: red"},
    {"instruction": "You are the listener.", "prompt": "Round 2 of 2. Message: green green"},
]


@pytest.fixture(scope="module")
def policies(tiny_model_dir):
    return build_policies("L1", ["speaker", "listener"], tiny_model_dir, device="cpu")


def test_prompt_tokens_come_from_the_chat_template(policies):
    tok = policies["shared"].tokenizer
    ids = encode_observation(tok, OBS[0])
    text = tok.decode(ids)
    assert text.startswith("<|system|> You are the speaker") and text.endswith("<|assistant|>")
    # an empty instruction leaves out the system message
    assert not tok.decode(encode_observation(tok, OBS[1])).startswith("<|system|>")


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_logprobs_match_a_separate_forward_pass(policies, temperature):
    engine = HFEngine(policies, SamplingParams(temperature=temperature, max_new_tokens=6), seed=3)
    prompts = [engine.encode("shared", o) for o in OBS]
    assert len({len(p) for p in prompts}) == 3  # different lengths: left padding is exercised
    gens = engine.generate("shared", prompts, n=3)
    flat_p = [p for p in prompts for _ in range(3)]
    flat = [g for row in gens for g in row]
    batch = pack_sequences(flat_p, [g.token_ids for g in flat], policies["shared"].tokenizer.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(policies["shared"].model, batch, temperature=temperature)
    for i, g in enumerate(flat):
        assert len(g.logprobs) == len(g.token_ids) > 0
        assert torch.allclose(torch.tensor(g.logprobs), lp[i, : len(g.token_ids)], atol=1e-4)


def test_stop_token_ends_completion_and_text_is_decoded(policies):
    tok = policies["shared"].tokenizer
    engine = HFEngine(policies, SamplingParams(max_new_tokens=12), seed=0)
    gens = [g for row in engine.generate("shared", [engine.encode("shared", OBS[0])], n=32) for g in row]
    for g in gens:
        if g.finish_reason == "stop":
            assert g.token_ids[-1] == tok.eos_token_id and tok.eos_token_id not in g.token_ids[:-1]
        else:
            assert len(g.token_ids) == 12 and tok.eos_token_id not in g.token_ids
        assert g.text == tok.decode(g.token_ids, skip_special_tokens=True)


def test_sampling_is_seeded_and_leaves_global_rng_alone(policies):
    prompts = [HFEngine(policies).encode("shared", OBS[0])]
    state = torch.random.get_rng_state()
    a = HFEngine(policies, SamplingParams(max_new_tokens=5), seed=7).generate("shared", prompts, n=4)
    b = HFEngine(policies, SamplingParams(max_new_tokens=5), seed=7).generate("shared", prompts, n=4)
    c = HFEngine(policies, SamplingParams(max_new_tokens=5), seed=8).generate("shared", prompts, n=4)
    assert torch.equal(state, torch.random.get_rng_state())

    def ids(result):
        return [g.token_ids for g in result[0]]

    assert ids(a) == ids(b) and ids(a) != ids(c)


def test_greedy_candidates_are_identical(policies):
    engine = HFEngine(policies, SamplingParams(temperature=0.0, max_new_tokens=5), seed=0)
    row = engine.generate("shared", [engine.encode("shared", OBS[2])], n=3)[0]
    assert row[0].token_ids == row[1].token_ids == row[2].token_ids


def test_model_generation_config_cannot_change_the_sampler(tiny_model_dir):
    """A model whose generation_config says top_k=1 (greedy-like) still samples the full softmax."""
    ps = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
    ps["shared"].model.generation_config.top_k = 1
    ps["shared"].model.generation_config.temperature = 0.01
    engine = HFEngine(ps, SamplingParams(temperature=1.0, max_new_tokens=1), seed=0)
    row = engine.generate("shared", [engine.encode("shared", OBS[0])], n=64)[0]
    first = [g.token_ids[0] for g in row]
    assert len(set(first)) > 5  # top_k=1 would give one token


def test_first_token_frequencies_follow_the_softmax(policies):
    engine = HFEngine(policies, SamplingParams(temperature=1.0, max_new_tokens=1), seed=11, max_batch_size=512)
    prompt = engine.encode("shared", OBS[0])
    row = engine.generate("shared", [prompt], n=2000)[0]
    counts = torch.bincount(torch.tensor([g.token_ids[0] for g in row]), minlength=len(policies["shared"].tokenizer))
    probs = torch.exp(torch.tensor([g.logprobs[0] for g in row]))
    tok_probs = {g.token_ids[0]: float(p) for g, p in zip(row, probs)}
    for t, p in tok_probs.items():
        expected = 2000 * p
        if expected > 50:
            assert abs(counts[t].item() - expected) < 5 * (expected ** 0.5), (t, counts[t].item(), expected)


def test_hf_agent_protocol_outputs_tokens(policies):
    engine = HFEngine(policies, SamplingParams(max_new_tokens=4), seed=0)
    agent = HFAgent(engine, "shared")
    outs = agent.act_batch([ActRequest(o, "speaker") for o in OBS])
    assert len(outs) == 3
    for o, obs in zip(outs, OBS):
        assert o.prompt_token_ids == engine.encode("shared", obs)
        assert o.token_ids and len(o.logprobs) == len(o.token_ids) == o.completion_tokens
        assert o.error is None
    rows = agent.sample([ActRequest(OBS[0], "speaker")], n=4)
    assert len(rows) == 1 and len(rows[0]) == 4
    assert all(o.prompt_token_ids == rows[0][0].prompt_token_ids for o in rows[0])


def test_from_pretrained_agent(tiny_model_dir):
    agent = HFAgent.from_pretrained(tiny_model_dir, sampling=SamplingParams(max_new_tokens=3), device="cpu")
    assert isinstance(agent.act(OBS[0]), str)
