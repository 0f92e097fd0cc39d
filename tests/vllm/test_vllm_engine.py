"""The vLLM engine against real vLLM on SmolLM2-135M-Instruct (``smollm2``), in float32.

Two engine starts serve the whole module (conftest.py): one without LoRA (evaluation through
``vllm:``, log-probabilities, L1 training with full-weight pushes, the asynchronous trainer),
then one with LoRA (L2 training with per-agent adapters pushed under new versions, the
base-model/adapter batch). Tolerances: vLLM's float32 CPU kernels and the learner's forward
pass add in different orders; the sampled-token log-probabilities measured here agree to ~1e-4
(the issue measured 4e-5), and the tests allow 2e-3 — a pushed update that did not arrive, or a
base row served with an adapter, moves them by 1e-2 and more.
"""

from __future__ import annotations

import json

import pytest

from tests.vllm.conftest import NO_VLLM

pytest.importorskip("vllm", reason=NO_VLLM)

import torch  # noqa: E402

from llm_envs.agents.base import ActRequest  # noqa: E402
from llm_trainers.agents.hf import HFAgent, SamplingParams  # noqa: E402
from llm_trainers.agents.vllm import VLLMAgent, VLLMEngine  # noqa: E402
from llm_trainers.batching import completion_logprobs, pack_sequences  # noqa: E402
from llm_trainers.config import VLLMConfig, load_config  # noqa: E402

ATOL = 2e-3  # see the module docstring
MODEL = "smollm2"
SPEAKER_OBS = {"instruction": "You are the speaker. Name the target colour in one word.", "prompt": "Target: red"}
QUESTION = {"instruction": "", "prompt": "What is the capital of France? Answer in one word."}


def hf_logprobs(pol, prompt, completions, reference=False):
    """The learner's log-probabilities of ``completions`` after ``prompt`` (its adapter, or off)."""
    batch = pack_sequences([prompt] * len(completions), completions, pol.tokenizer.pad_token_id)
    with torch.no_grad():
        with (pol.reference() if reference else pol.activated()) as model:
            lp, _ = completion_logprobs(model, batch)
    return [lp[i, : len(c)] for i, c in enumerate(completions)]


def max_gap(pol, prompt, row, reference=False):
    expected = hf_logprobs(pol, prompt, [g.token_ids for g in row], reference=reference)
    return max(float((torch.tensor(g.logprobs) - e).abs().max()) for g, e in zip(row, expected))


def settings(tmp_path) -> VLLMConfig:
    return VLLMConfig(adapter_dir=str(tmp_path / "adapters"))


def trainer_overrides(tmp_path, *extra):
    return [
        "env.id=llm/Signalling-v0", "env.num_envs=2", f"model.path={MODEL}", "model.device=cpu",
        "model.dtype=float32", "rollout.engine=vllm", "rollout.k=2", "rollout.max_new_tokens=4",
        f"rollout.vllm={{adapter_dir: {tmp_path / 'adapters'}}}", "run.steps=2", "run.eval_every=2",
        "run.eval_at_start=false", "run.eval_episodes=2", "run.save_every=-1", "run.progress=false",
        "run.tensorboard=false", "run.export_final=false", "run.threads=1", f"run.output_dir={tmp_path / 'run'}",
        "train.micro_batch_size=16", *extra,
    ]


def metrics(tmp_path):
    return [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------------- engine without LoRA
def test_evaluation_through_a_vllm_agent_matches_the_hf_agent(tmp_path):
    """``vllm:smollm2`` (greedy) answers as transformers does, token for token; an episode of an
    environment is played through it by the runner."""
    from llm_envs.agents.spec import build_agent, parse_agent_spec
    from llm_envs.runner import run_episodes

    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    spec = parse_agent_spec(f"vllm:{MODEL}").with_options(
        {"temperature": 0.0, "max_new_tokens": 12, "settings": {"adapter_dir": str(tmp_path / "adapters")}})
    agent = build_agent(spec)
    assert isinstance(agent, VLLMAgent)
    hf = HFAgent.from_pretrained(MODEL, sampling=greedy, device="cpu", threads=1)
    requests = [ActRequest(QUESTION, "a"), ActRequest(SPEAKER_OBS, "speaker")]
    ours, theirs = agent.act_batch(requests), hf.act_batch(requests)
    assert [o.token_ids for o in ours] == [t.token_ids for t in theirs]
    assert "paris" in ours[0].text.lower()
    results = run_episodes("llm/Signalling-v0", {"speaker": agent, "listener": agent}, 2, seed=0,
                           out_path=tmp_path / "eval.jsonl")
    assert len(results) == 2 and all(r.metrics["turns"] > 0 for r in results)
    agent.close()


def test_sampled_token_logprobs_are_the_learners(tmp_path):
    from llm_trainers.policies import build_policies

    ps = build_policies("L1", ["a"], MODEL, device="cpu", dtype="float32")
    engine = VLLMEngine(ps, SamplingParams(max_new_tokens=12), seed=3, settings=settings(tmp_path))
    prompt = engine.encode("shared", SPEAKER_OBS)
    row = engine.generate("shared", [prompt], n=4)[0]
    assert len({tuple(g.token_ids) for g in row}) > 1  # per-request seeds: distinct samples
    gap = max_gap(ps["shared"], prompt, row)
    print(f"max |engine - learner| log-prob: {gap:.2e}")
    assert gap < ATOL
    engine.close()


def test_a_stop_token_is_in_the_text_as_in_the_hf_engine(tmp_path):
    # vLLM left a stop token's characters out of the text while keeping its id: with "." as a
    # stop token the environment read "... is Paris" where the HF engine gave "... is Paris."
    from llm_trainers.agents.hf import HFEngine
    from llm_trainers.policies import build_policies

    ps = build_policies("L1", ["a"], MODEL, device="cpu", dtype="float32")
    dot = ps["shared"].tokenizer.encode(".", add_special_tokens=False)[-1]
    params = SamplingParams(temperature=0.0, max_new_tokens=16, stop_token_ids=[dot])
    hf = HFEngine(ps, params, seed=0)
    prompt = hf.encode("shared", {"instruction": "", "prompt": "What is the capital of France? Answer with one short sentence."})
    expected = hf.generate("shared", [prompt], n=1)[0][0]
    engine = VLLMEngine(ps, params, seed=0, settings=settings(tmp_path))
    got = engine.generate("shared", [prompt], n=1)[0][0]
    engine.close()
    assert got.token_ids == expected.token_ids and got.token_ids[-1] == dot
    assert got.text == expected.text and got.text.endswith(".")


def test_a_batch_larger_than_one_step_of_prefill_is_sampled_whole(tmp_path):
    """Seeded requests whose prompts exceed the CPU build's token budget for one step: with
    chunked prefill vLLM 0.32 prefilled one in part and then failed rewinding its CPU generator
    ("CPU Generator does not use offset", a training run of 12 environments × K 4 ended so); the
    engine turns chunked prefill off on the CPU build, and every request is sampled."""
    from llm_trainers.policies import build_policies

    ps = build_policies("L1", ["a"], MODEL, device="cpu", dtype="float32")
    engine = VLLMEngine(ps, SamplingParams(max_new_tokens=4), seed=5,
                        settings=VLLMConfig(adapter_dir=str(tmp_path / "adapters"), max_model_len=2048))
    config = next(iter(engine.engines.values())).llm_engine.vllm_config.scheduler_config
    prompts = [engine.encode("shared", {"instruction": "word " * 300, "prompt": f"problem {i}"}) for i in range(40)]
    assert sum(map(len, prompts)) > 2 * config.max_num_batched_tokens  # several steps of prefill
    rows = engine.generate("shared", prompts, n=2)
    assert len(rows) == 40 and all(len(row) == 2 and all(g.token_ids for g in row) for row in rows)
    assert not config.enable_chunked_prefill
    # A prompt that leaves no room in max_model_len is answered empty (vLLM raised for the whole
    # call); the call's other prompts are sampled.
    too_long = engine.encode("shared", {"instruction": "word " * 2100, "prompt": "problem"})
    assert len(too_long) >= 2048
    rows = engine.generate("shared", [too_long, prompts[0]], n=2)
    assert [(g.token_ids, g.finish_reason) for g in rows[0]] == [([], "context_length")] * 2
    assert all(g.token_ids for g in rows[1])
    engine.close()


def test_l1_training_pushes_full_weights_after_each_update(tmp_path):
    from llm_trainers.trainer import Trainer

    trainer = Trainer(load_config(None, trainer_overrides(tmp_path, "model.level=L1", "train.lr=1e-4")))
    pol = trainer.policies["shared"]
    prompt = trainer.engine.encode("shared", SPEAKER_OBS)
    initial = {n: p.detach().clone() for n, p in pol.model.named_parameters()}
    trainer.train()
    rows = metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2]
    size = sum(p.numel() * p.element_size() for p in pol.model.parameters())
    assert all(r["push/weight_push_bytes"] == size for r in rows)  # every weight, every step
    assert any(not torch.equal(initial[n], p) for n, p in pol.model.named_parameters())
    row = trainer.engine.generate("shared", [prompt], n=3)[0]
    assert max_gap(pol, prompt, row) < ATOL  # the engine serves the updated weights
    trainer.close()


def test_asynchronous_trainer_samples_with_vllm(tmp_path):
    """``rollout.async.max_staleness: 1`` with the vLLM engine in this process: the producer
    thread samples from vLLM, which loads the published snapshots."""
    from llm_trainers.trainer import Trainer

    trainer = Trainer(load_config(None, trainer_overrides(
        tmp_path, "model.level=L1", "train.lr=1e-4", "run.steps=3", "run.eval_every=3",
        "rollout.async={max_staleness: 1, correction: tis, is_cap: 2.0}", "algorithm.recompute_old_logprobs=true")))
    assert trainer.async_shares_engine and isinstance(trainer.engine, VLLMEngine)
    trainer.train()
    rows = metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(r["tokens/generated"] > 0 for r in rows)
    assert max(r["async/version_lag"] for r in rows) <= 1
    assert any(r["async/weight_load_s"] > 0 for r in rows[1:])  # snapshots were loaded into vLLM
    assert "eval/success" in rows[-1]
    trainer.close()


def test_vllm_serve_through_the_openai_agent_plays_as_the_offline_engine(vllm_server, tmp_path):
    """`vllm serve` (vLLM's server, nobody here wrote it) on the same converted model, played
    through the ``openai:`` agent, greedy: the same episodes (seeds 0-3) give the same actions as
    the offline engine through ``vllm:``. Sampled play differs by design (docs/evaluation.md): the
    ``openai:`` agent sends one seed with every request, the offline engine one seed per request
    drawn from its generator."""
    from llm_envs.agents.spec import build_agent, parse_agent_spec
    from llm_envs.runner import run_episodes

    served = build_agent(parse_agent_spec(f"openai:{vllm_server['url']}@smollm2").with_options(
        {"temperature": 0.0, "max_tokens": 16, "seed": 0}))
    offline = build_agent(parse_agent_spec(f"vllm:{MODEL}").with_options(
        {"temperature": 0.0, "max_new_tokens": 16, "settings": {"adapter_dir": str(tmp_path / "adapters")}}))

    def actions(agent, name):
        results = run_episodes("llm/Signalling-v0", {"speaker": agent, "listener": agent}, 4, seed=0,
                               out_path=tmp_path / f"{name}.jsonl")
        return [[r["action"] for r in res.records] for res in sorted(results, key=lambda r: r.index)]

    ours, theirs = actions(offline, "offline"), actions(served, "served")
    print("served:", theirs)
    assert ours == theirs
    offline.close()
    served.close()


# ---------------------------------------------------------------------------- engine with LoRA
def test_l2_training_pushes_each_adapter_under_a_new_version(tmp_path):
    from llm_trainers.trainer import Trainer

    trainer = Trainer(load_config(None, trainer_overrides(
        tmp_path, "model.level=L2", "train.lr=5e-3", "rollout.vllm.lora_serving=adapter",
        "model.lora={r: 8, alpha: 16, target_modules: [q_proj, k_proj, v_proj, o_proj]}")))
    engine = trainer.engine
    first = {n: engine.served[n].lora_id for n in ("speaker", "listener")}
    trainer.train()
    # a policy is pushed after each step in which it was updated (not when its groups had no spread)
    pushed = [n for n in ("speaker", "listener") if engine.served[n].version > 1]
    assert pushed
    for n in pushed:
        served = engine.served[n]
        assert served.lora_id != first[n] and served.lora_path.endswith(f"v{served.version}")
        assert served.checked  # vLLM serves the trained adapter (first-sync check)
    ids = [s.lora_id for s in engine.served.values() if s.adapter]
    assert len(set(ids)) == len(ids)  # never reused
    assert sorted(engine.engines["engine0"].llm_engine.list_loras()) == sorted(
        s.lora_id for s in engine.served.values() if s.adapter)  # old versions removed
    rows = metrics(tmp_path)
    pushes = [r.get("push/weight_push_bytes", 0.0) for r in rows]  # absent in a step that updated nothing
    assert all(b < 10e6 for b in pushes) and any(pushes)
    prompt = engine.encode("speaker", SPEAKER_OBS)
    for n in ("speaker", "listener"):  # adapters only, both served as the learner has them
        assert max_gap(trainer.policies[n], prompt, engine.generate(n, [prompt], n=2)[0]) < ATOL
    _mixed_batch_checks(trainer, prompt)
    trainer.close()


def _mixed_batch_checks(trainer, prompt):
    """Base-model and adapter requests together: every row is served by its own weights.

    On vLLM 0.32's CPU path one ``generate`` call holding both serves the base rows with the last
    adapter slot (a no-adapter row's slot index is -1); the engine never makes such a call. Both
    adapters are made to differ from the base model first (an adapter that got no update equals
    it, and would hide the bug), and the same batch sent as one raw vLLM call shows the bug, so the
    engine's check above it is one that can fail."""
    engine = trainer.engine
    speaker, listener = trainer.policies["speaker"], trainer.policies["listener"]
    with torch.no_grad():  # a distinct, non-zero listener adapter, pushed as a new version
        g = torch.Generator().manual_seed(5)
        for p in listener.trainable_parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
    engine.sync(["listener"])
    base = engine.base_policy("speaker")
    requests = [("speaker", prompt), (base, prompt), ("listener", prompt), (base, prompt)]
    rows = engine.generate_multi(requests, n=2)
    assert max_gap(speaker, prompt, rows[0]) < ATOL
    assert max_gap(listener, prompt, rows[2]) < ATOL
    for row in (rows[1], rows[3]):
        assert max_gap(speaker, prompt, row, reference=True) < ATOL  # the base model, adapters off
    # the same batch in one raw vLLM call: what the engine avoids
    llm = engine.engines["engine0"]
    sps = [engine._vllm_sampling(SamplingParams(max_new_tokens=4), 1, 11 + i) for i in range(4)]
    loras = [engine._lora_request(engine.served["speaker"]), None, engine._lora_request(engine.served["listener"]), None]
    raw = llm.generate([{"prompt_token_ids": prompt}] * 4, sps, lora_request=loras, use_tqdm=False)

    def as_rows(out):
        return [type("G", (), {"token_ids": list(c.token_ids),
                               "logprobs": [c.logprobs[i][t].logprob for i, t in enumerate(c.token_ids)]})()
                for c in out.outputs]

    raw_gap = max(max_gap(speaker, prompt, as_rows(raw[i]), reference=True) for i in (1, 3))
    print(f"raw mixed batch, base rows vs the base model: {raw_gap:.2e}")
    assert raw_gap > 1e-2, (
        "one vLLM call mixing base and adapter rows served the base rows right: the CPU bug this engine "
        "works around is gone in this vLLM (the split into separate calls still holds)")


# ---------------------------------------------------------------------------- merged LoRA serving
def test_l2_training_with_merged_serving_pushes_each_policy_its_merged_weights(tmp_path):
    """The CPU build's default, ``lora_serving: auto`` (merged): each LoRA policy has an engine of
    its own without vLLM's LoRA path (4.5× its CPU per token here), and each update is pushed as
    the base weights with that policy's adapter merged in; vLLM then samples each policy's tokens
    with the learner's log-probabilities, the two policies apart."""
    from llm_trainers.trainer import Trainer

    trainer = Trainer(load_config(None, trainer_overrides(
        tmp_path, "model.level=L2", "train.lr=5e-3",
        "model.lora={r: 8, alpha: 16, target_modules: all-linear}")))
    engine = trainer.engine
    assert {n: engine.served[n].merged for n in ("speaker", "listener")} == {"speaker": True, "listener": True}
    assert engine.served["speaker"].engine_key != engine.served["listener"].engine_key
    assert not any(llm.llm_engine.vllm_config.lora_config for llm in engine.engines.values())
    trainer.train()
    size = sum(p.numel() * p.element_size() for n, p in trainer.policies["speaker"].model.named_parameters()
               if ".lora_" not in n)
    rows = metrics(tmp_path)
    pushes = [r.get("push/weight_push_bytes", 0.0) for r in rows]  # absent in a step that updated nothing
    assert any(pushes) and all(b % size == 0 for b in pushes)  # full weights, one model per pushed policy
    for n in ("speaker", "listener"):  # both made distinct from the base model, pushed, then served as trained
        with torch.no_grad():
            g = torch.Generator().manual_seed(len(n))
            for p in trainer.policies[n].trainable_parameters():
                p.add_(torch.randn(p.shape, generator=g) * 0.05)
    engine.sync(["speaker", "listener"])
    prompt = engine.encode("speaker", SPEAKER_OBS)
    rows = engine.generate_multi([("speaker", prompt), ("listener", prompt)], n=2)
    for n, row in zip(("speaker", "listener"), rows):
        assert engine.served[n].checked
        assert max_gap(trainer.policies[n], prompt, row) < ATOL
    assert max_gap(trainer.policies["speaker"], prompt, rows[1]) > 1e-2  # the listener's engine is not the speaker's
    trainer.close()
