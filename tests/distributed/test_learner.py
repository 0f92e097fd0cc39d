"""The learner over two torch.distributed ranks (gloo, CPU) equals the single-process learner."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the learner tests need the 'train' extra")

from llm_trainers.config import load_config  # noqa: E402
from llm_trainers.distributed.learner import LearnerGroup  # noqa: E402
from llm_trainers.learner import Learner, UpdateSample  # noqa: E402
from llm_trainers.specs import learner_kwargs, policy_spec  # noqa: E402

AGENTS = ["speaker", "listener"]
LORA = "model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj, lm_head]}"

CASES = {
    "L1": ["model.level=L1"],
    "L2": ["model.level=L2", LORA],
    "L2-replicate": ["model.level=L2", LORA, "resources.learner_sharding=replicate"],
    "L3": ["model.level=L3"],
    "L3-split": ["model.level=L3", "resources.policy_ranks={speaker: [0], listener: [1]}",
                 "model.gradient_checkpointing=true"],
}


def _config(model_dir, case):
    # adam_eps 1e-3: AdamW's first steps move each weight by about lr·g/(|g| + eps), so with the
    # default 1e-8 a near-zero gradient element whose value differs in the last bits (sums in
    # another order) moves by a different ±lr; a larger eps keeps the comparison about gradients.
    return load_config(None, [
        f"model.path={model_dir}", "model.device=cpu", "model.dtype=float32",
        "train.lr=1e-2", "train.micro_batch_size=2", "train.num_mini_batches=2", "train.epochs=2",
        "train.max_grad_norm=0.5", "train.adam_eps=1e-3", "train.kl_loss_coef=0.1", "train.entropy_coef=0.01", "train.weight_decay=0.01",
        "resources.learner_world_size=2", "resources.gpus_per_learner=0", "resources.cpus_per_learner=0.5",
        *CASES[case],
    ])


def _samples(policies, learner, vocab, seed):
    """Synthetic samples with the policy's own old/ref log-probs and varied lengths (7 per policy:
    the ranks get 4 and 3, so one of them runs a zero-weight micro-batch)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name in policies.names():
        prompts = [torch.randint(3, vocab, (int(torch.randint(3, 9, (1,), generator=gen)),), generator=gen).tolist()
                   for _ in range(7)]
        comps = [torch.randint(3, vocab, (int(torch.randint(1, 5, (1,), generator=gen)),), generator=gen).tolist()
                 for _ in range(7)]
        old = learner.logprobs(name, prompts, comps)
        ref = learner.logprobs(name, prompts, comps, reference=True)
        out[name] = [UpdateSample(p, c, torch.randn(len(c), generator=gen), o, r)
                     for p, c, o, r in zip(prompts, comps, old, ref)]
    return out


@pytest.fixture(scope="module")
def ranks(local_ray, tiny_signalling_model):
    """Two learner ranks with their gloo process group, rebuilt for each case."""
    actors = LearnerGroup.launch(_config(tiny_signalling_model, "L1").resources)
    yield actors
    LearnerGroup(actors, {}, None).close()


def _params(policies):
    return {f"{p.name}/{k}": v for p in policies for k, v in p.trainable_state_dict().items()}


@pytest.mark.parametrize("case", list(CASES))
def test_one_distributed_update_equals_the_single_process_update(ranks, tiny_signalling_model, case):
    cfg = _config(tiny_signalling_model, case)
    spec = policy_spec(cfg, AGENTS, tiny_signalling_model).with_changes(need_reference=True)
    local = spec.build()
    mirror = spec.build()
    learner = Learner(local, **learner_kwargs(cfg, False))
    vocab = next(iter(local)).tokenizer.vocab_size if hasattr(next(iter(local)).tokenizer, "vocab_size") else 30
    group = LearnerGroup.build(ranks, cfg, AGENTS, tiny_signalling_model, mirror)
    if case == "L3-split":
        assert group.rank_sets == {"speaker": [0], "listener": [1]}
    for step in range(2):  # the second step runs on restored AdamW moments
        samples = _samples(local, learner, vocab, seed=step)
        first = samples[local.names()[0]]
        prompts, comps = [s.prompt_ids for s in first], [s.completion_ids for s in first]
        for reference in (False, True):
            got = group.logprobs(local.names()[0], prompts, comps, reference=reference)
            for a, b in zip(got, learner.logprobs(local.names()[0], prompts, comps, reference=reference)):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        expected = learner.update_all(samples)
        got = group.update_all(samples)
        for policy in local.names():
            for key in ("loss", "pg_loss", "kl", "entropy", "clip_frac", "grad_norm", "ratio_max", "lr", "samples"):
                assert got[policy][key] == pytest.approx(expected[policy][key], rel=1e-4, abs=1e-6), (policy, key)
        want, have = _params(local), _params(mirror)
        assert want.keys() == have.keys()
        for k in want:
            torch.testing.assert_close(have[k], want[k], atol=2e-6, rtol=1e-5, msg=k)
    assert group.trained_tokens == learner.trained_tokens
    # the gathered learner state is the single-process format, with the same values
    saved, reference_state = group.state_dict(), learner.state_dict()
    for policy in local.names():
        a, b = saved["optimizers"][policy], reference_state["optimizers"][policy]
        assert a["state"].keys() == b["state"].keys()
        for idx in a["state"]:
            for key in ("exp_avg", "exp_avg_sq"):
                torch.testing.assert_close(a["state"][idx][key], b["state"][idx][key], atol=1e-6, rtol=1e-4)
        assert saved["schedulers"][policy] == reference_state["schedulers"][policy]
        assert torch.equal(saved["generators"][policy], reference_state["generators"][policy])
