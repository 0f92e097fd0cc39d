"""The supervised warm start (``sft``), its demonstrations and ``env.curriculum`` on tiny models."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import llm_envs
from llm_envs.core.messages import to_chat_messages
from llm_trainers import demonstrations
from llm_trainers.config import load_config, warm_start_problems
from llm_trainers.demonstrations import iter_demonstrations, perturb_action, read_jsonl, write_jsonl
from llm_trainers.sft import IGNORE_INDEX, WarmStart, encode_example
from llm_trainers.trainer import TRAIN_SEED_BASE, Trainer, set_option

SIGNALLING = {"rounds": 2}

BASE = [
    "model.path=tiny:llm/Signalling-v0",
    "model.device=cpu",
    "env.kwargs={rounds: 2}",
    "env.num_envs=4",
    "rollout.max_new_tokens=3",
    "rollout.eval_temperature=0",
    "run.steps=1",
    "run.eval_episodes=4",
    "run.progress=false",
    "run.tensorboard=false",
    "run.export_final=false",
    "run.threads=1",
    "sft.episodes=8",
    "sft.batch_size=8",
    "sft.lr=3e-3",
]
L2 = ["model.level=L2", "model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj, lm_head]}", "sft.lr=2e-2"]


def _params(trainer, policy=None):
    return {f"{p.name}/{k}": v.clone() for p in trainer.policies if policy in (None, p.name)
            for k, v in p.trainable_state_dict().items()}


def _trainer(tmp_path, *overrides, name="run", resume=False):
    return Trainer(load_config(None, [*BASE, *overrides, f"run.output_dir={tmp_path / name}"]), resume=resume)


# ---------------------------------------------------------------------- demonstrations


def test_demonstrations_are_the_rollout_prompts_on_training_seeds():
    examples = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=3, run_seed=5))
    assert len(examples) == 3 * 2 * 2  # 3 episodes, 2 rounds, speaker and listener
    assert all(TRAIN_SEED_BASE <= ex["seed"] < 2 * TRAIN_SEED_BASE for ex in examples)  # never an evaluation seed
    assert demonstrations.TRAIN_SEED_BASE == TRAIN_SEED_BASE
    assert len({ex["seed"] for ex in examples}) == 3
    # Replay the first episode: every example's messages are to_chat_messages(observe(agent)),
    # and its target is the reference action at that state.
    env = llm_envs.make("llm/Signalling-v0", **SIGNALLING)
    env.reset(seed=examples[0]["seed"])
    replayed = []
    for agent in env.agent_iter():
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            continue
        action = env.reference_action(agent)
        replayed.append([*to_chat_messages(env.observe(agent)), {"role": "assistant", "content": action}])
        env.step(action)
    assert [ex["messages"] for ex in examples[:4]] == replayed
    assert env.episode_metrics()["success"] == 1.0
    # another run seed, another stream
    other = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=3, run_seed=6))
    assert {ex["seed"] for ex in other}.isdisjoint({ex["seed"] for ex in examples})


def test_demonstrations_filter_agents_and_mix_imperfect_actions():
    only = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=4, agents=["listener"]))
    assert {ex["agent"] for ex in only} == {"listener"} and len(only) == 8
    assert {ex["role"] for ex in iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=2,
                                                     roles=["speaker"])} == {"speaker"}
    mixed = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=50, random_fraction=0.5))
    share = np.mean([ex["source"] == "random" for ex in mixed])
    assert 0.35 < share < 0.65
    assert {ex["source"] for ex in mixed} == {"random", "reference"}
    with pytest.raises(ValueError, match="add up to at most 1"):
        next(iter_demonstrations("llm/Signalling-v0", SIGNALLING, random_fraction=0.7, perturb_fraction=0.5))
    with pytest.raises(ValueError, match="no agent"):
        next(iter_demonstrations("llm/Signalling-v0", SIGNALLING, agents=["nobody"]))


def test_imperfect_shares_per_agent_or_role():
    """A mapping gives each agent (or role) its own share; an agent not named keeps the
    reference's actions; an agent's entry wins over its role's."""
    per_role = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=60,
                                        random_fraction={"listener": 0.6}))
    by_agent = {agent: [ex["source"] for ex in per_role if ex["agent"] == agent] for agent in ("speaker", "listener")}
    assert set(by_agent["speaker"]) == {"reference"}
    assert 0.45 < np.mean([s == "random" for s in by_agent["listener"]]) < 0.75
    assert demonstrations.share_for({"solver": 1.0, "agent_0": 0.25}, "agent_0", "solver") == 0.25
    assert demonstrations.share_for({"solver": 1.0}, "agent_0", "solver") == 1.0
    assert demonstrations.share_for({"solver": 1.0}, "agent_0", "judge") == 0.0
    with pytest.raises(ValueError, match="'listener' must be >= 0 and add up to at most 1"):
        next(iter_demonstrations("llm/Signalling-v0", SIGNALLING, random_fraction={"listener": 0.7},
                                 perturb_fraction={"listener": 0.5}))
    with pytest.raises(ValueError, match="must be a number"):
        next(iter_demonstrations("llm/Signalling-v0", SIGNALLING, random_fraction={"listener": "half"}))
    with pytest.raises(ValueError, match="sft: random_fraction \\(1.5\\).*'listener'"):
        load_config("signalling_at_grpo_l2", ["sft.random_fraction={listener: 1.5}"])
    cfg = load_config("signalling_at_grpo_l2", ["sft.random_fraction={listener: 0.5}"])
    assert warm_start_problems(cfg) == [] and cfg.sft.random_fraction == {"listener": 0.5}


def test_perturbed_actions_change_one_digit_or_move():
    rng = np.random.default_rng(0)
    for _ in range(20):
        near = perturb_action("41 + 83 = 124", rng)
        diff = [(a, b) for a, b in zip("41 + 83 = 124", near) if a != b]
        assert len(near) == len("41 + 83 = 124") and len(diff) == 1 and diff[0][1].isdigit()
        moves = perturb_action("#### R R D", rng)
        diff = [(a, b) for a, b in zip("#### R R D", moves) if a != b]
        assert len(diff) == 1 and diff[0][1] in "UDLR"
    assert perturb_action("two words", rng) in ("two", "words")
    assert perturb_action("green", rng) is None  # nothing to perturb: the caller takes a random action
    demos = list(iter_demonstrations("llm/ReasonerTool-v0", {"agents": "single", "task_kwargs": {"level": 1}},
                                     episodes=20, perturb_fraction=1.0))
    assert all(ex["source"] == "perturbed" for ex in demos)
    # the answer is what a grader reads: a boxed answer's digit is the one changed
    near = perturb_action("2 × 4 = 8, and 8 + 1 = 9. \\boxed{9}", rng)
    assert near.startswith("2 × 4 = 8, and 8 + 1 = 9. \\boxed{") and not near.endswith("{9}")


def test_perturbed_actions_are_misses_the_grader_pays_less():
    """A digit changed in the working but not in the answer is still right: 65 of 100
    "perturbed" reasoner actions once kept the reference's boxed answer and passed
    successful_only. A perturbed action is now kept only where the grader pays it less."""
    import re

    import llm_envs
    from llm_envs.audit.runner import action_reward

    kwargs = {"agents": "multi", "max_turns": 1, "task": "arithmetic", "task_kwargs": {"level": 1}, "split": "train"}
    boxed = re.compile(r"\\boxed\{([^}]*)\}")
    reference = {(ex["episode"], ex["agent"]): ex["messages"][-1]["content"]
                 for ex in iter_demonstrations("llm/ReasonerTool-v0", kwargs, episodes=30, agents=["reasoner"])}
    perturbed = list(iter_demonstrations("llm/ReasonerTool-v0", kwargs, episodes=30, agents=["reasoner"],
                                         perturb_fraction=1.0))
    assert {ex["source"] for ex in perturbed} == {"perturbed"}
    for ex in perturbed:
        assert boxed.findall(ex["messages"][-1]["content"]) != boxed.findall(reference[(ex["episode"], ex["agent"])])
    assert not list(iter_demonstrations("llm/ReasonerTool-v0", kwargs, episodes=30, agents=["reasoner"],
                                        perturb_fraction=1.0, successful_only=True))
    # a near miss is judged by the grader, not the text: on a one-turn Plan-Path episode every
    # perturbed plan program is paid less than the reference program
    env = llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=1, rows=4, cols=4)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    right = action_reward(env, "solver", env.reference_action("solver"))
    for _ in range(5):
        near = demonstrations.near_miss(env, "solver", env.reference_action("solver"), rng)
        assert near is not None and action_reward(env, "solver", near) < right


def test_jsonl_round_trip_and_clear_errors(tmp_path):
    examples = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=2))
    path = tmp_path / "demos.jsonl"
    assert write_jsonl(examples, path) == len(examples)
    assert list(read_jsonl(path)) == examples
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: .*assistant"):
        list(read_jsonl(bad))
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not JSON"):
        list(read_jsonl(bad))


# ---------------------------------------------------------------------- tokens and labels


def test_labels_mask_the_prompt_and_keep_the_action_and_eos(tiny_model_dir):
    from transformers import AutoTokenizer

    from llm_trainers.agents.hf import encode_observation

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ex = next(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=1))
    ids, labels = encode_example(tok, ex["messages"])
    system, user = ex["messages"][0]["content"], ex["messages"][1]["content"]
    prompt = encode_observation(tok, {"instruction": system, "prompt": user})  # what the rollout feeds
    assert ids[: len(prompt)] == prompt
    assert labels[: len(prompt)] == [IGNORE_INDEX] * len(prompt)
    action = labels[len(prompt):]
    assert IGNORE_INDEX not in action and action == ids[len(prompt):]
    assert action[-1] == tok.eos_token_id
    assert tok.decode(action[:-1]).strip() == ex["messages"][-1]["content"]


# ---------------------------------------------------------------------- learning


def test_a_tiny_model_learns_the_demonstrations(tmp_path):
    # 8 episodes = 32 examples, all of them in every step
    trainer = _trainer(tmp_path, "sft.steps=100", "sft.lr=1e-3", "sft.batch_size=32")
    start = trainer.warm_start()
    trainer_metrics = [json.loads(x) for x in (tmp_path / "run" / "sft" / "metrics.jsonl").read_text().splitlines()]
    losses = [m["sft/shared/loss"] for m in trainer_metrics]
    assert len(losses) == 100 and losses[-1] < losses[0] / 10
    assert start["sft/shared/token_accuracy"] == 1.0
    # greedy decoding of the warm-started policy reproduces the demonstrated actions
    examples = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=8))
    from llm_trainers.agents.hf import SamplingParams

    prompts = [trainer.engine.encode("shared", {"instruction": ex["messages"][0]["content"],
                                                 "prompt": ex["messages"][1]["content"]}) for ex in examples]
    outs = trainer.engine.generate("shared", prompts, sampling=SamplingParams(temperature=0.0, max_new_tokens=4))
    got = [o[0].text.strip() for o in outs]
    assert got == [ex["messages"][-1]["content"] for ex in examples]
    trainer.close()


def _full_sequence_loss(model, examples):
    """Mean token cross-entropy and token accuracy of ``examples``, each scored alone (no padding)
    through the full output layer: the definition the warm start's batched pass must equal."""
    loss, correct, tokens = 0.0, 0, 0
    with torch.no_grad():
        for ids, labels in examples:
            logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
            target = torch.tensor(labels[1:])
            keep = target != IGNORE_INDEX
            loss += float(torch.nn.functional.cross_entropy(logits[keep], target[keep], reduction="sum"))
            correct += int((logits[keep].argmax(-1) == target[keep]).sum())
            tokens += int(keep.sum())
    return loss / tokens, correct / tokens


@pytest.mark.parametrize("bf16", [False, True])
def test_batched_loss_equals_each_example_scored_alone(tmp_path, bf16):
    # Prompts and actions of different lengths in one micro-batch: the padded batch (the rollout's
    # left-padded layout, output layer on the action positions only) must give the loss of each
    # example run alone through the whole model.
    trainer = _trainer(tmp_path, "sft.micro_batch_size=3")
    stage = WarmStart(trainer.cfg, trainer.policies, trainer.policies.agent_to_policy, tmp_path / "stage", bf16=bf16)
    tok = trainer.policies["shared"].tokenizer
    examples = [encode_example(tok, ex["messages"]) for ex in iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=2)]
    examples.append((examples[0][0] + examples[0][0][-2:], examples[0][1] + examples[0][0][-2:]))  # a longer action
    assert len({len(ids) for ids, _ in examples}) > 1
    assert len({sum(label != IGNORE_INDEX for label in labels) for _, labels in examples}) > 1
    with trainer.policies["shared"].activated() as model:
        want_loss, want_accuracy = _full_sequence_loss(model, examples)
    got = stage.loss_and_step("shared", examples, lr=0.0)
    tolerance = 2e-2 if bf16 else 1e-5
    assert got["sft/shared/loss"] == pytest.approx(want_loss, rel=tolerance)
    if not bf16:
        assert got["sft/shared/token_accuracy"] == pytest.approx(want_accuracy)
    assert got["sft/shared/tokens"] == sum(sum(label != IGNORE_INDEX for label in labels) for _, labels in examples)
    trainer.close()


def test_split_example_refuses_labels_that_are_not_prompt_then_action():
    from llm_trainers.sft import split_example

    assert split_example([1, 2, 3, 4], [IGNORE_INDEX, IGNORE_INDEX, 3, 4]) == ([1, 2], [3, 4])
    for labels in ([1, 2, 3, 4], [IGNORE_INDEX, 2, IGNORE_INDEX, 4], [IGNORE_INDEX, IGNORE_INDEX, 9, 4], [IGNORE_INDEX, 3, 4]):
        with pytest.raises(ValueError, match="prompt"):
            split_example([1, 2, 3, 4], labels)


def test_l2_trains_each_adapter_only_on_its_own_agent(tmp_path):
    trainer = _trainer(tmp_path, *L2, "sft.steps=3", "sft.agents=[speaker]")
    before_speaker, before_listener = _params(trainer, "speaker"), _params(trainer, "listener")
    trainer.warm_start()
    after_speaker, after_listener = _params(trainer, "speaker"), _params(trainer, "listener")
    assert all(torch.equal(before_listener[k], after_listener[k]) for k in before_listener)
    assert any(not torch.equal(before_speaker[k], after_speaker[k]) for k in before_speaker)
    trainer.close()
    # with both agents' demonstrations, each policy's batch holds only its own agent's examples
    trainer = _trainer(tmp_path, *L2, "sft.steps=1", name="both")
    stage = WarmStart(trainer.cfg, trainer.policies, trainer.policies.agent_to_policy, tmp_path / "both")
    examples = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=8))
    tok = trainer.policies["speaker"].tokenizer
    encoded = {agent: [encode_example(tok, ex["messages"])[0] for ex in examples if ex["agent"] == agent]
               for agent in ("speaker", "listener")}
    batch = next(stage.batches(iter(examples)))
    assert set(batch) == {"speaker", "listener"}
    for policy, rows in batch.items():
        assert len(rows) == 8 and all(ids in encoded[policy] for ids, _ in rows)
    trainer.close()


def test_warm_start_resumes_exactly(tmp_path):
    full = _trainer(tmp_path, *L2, "sft.steps=4", "sft.random_fraction=0.3", name="full")
    full.warm_start()
    expected = _params(full)
    full.close()
    cut = _trainer(tmp_path, *L2, "sft.steps=2", "sft.random_fraction=0.3", name="cut")
    cut.warm_start()  # "stops" after 2 steps, its checkpoint on disk
    cut.close()
    (tmp_path / "cut" / "sft" / "done").unlink()  # as if it had been interrupted before finishing
    resumed = _trainer(tmp_path, *L2, "sft.steps=4", "sft.random_fraction=0.3", name="cut", resume=True)
    assert resumed.step == 0
    resumed.warm_start()
    got = _params(resumed)
    resumed.close()
    assert got.keys() == expected.keys()
    for k in expected:
        assert torch.equal(expected[k], got[k]), k
    lines = (tmp_path / "cut" / "sft" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3, 4]


def test_rl_continues_from_the_warm_start_in_the_run_and_from_its_output(tmp_path):
    trainer = _trainer(tmp_path, "sft.steps=30", "sft.batch_size=32", "run.eval_at_start=true")
    trainer.train()
    warm = torch.load(tmp_path / "run" / "sft" / "weights.pt")["shared"]
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    trainer.close()
    # a second run starts RL from the first one's warm start: same weights, and its evaluation is
    # the first run's step-0 evaluation (greedy, same seeds): step 0 evaluated the warm start
    again = _trainer(tmp_path, f"sft.init_from={tmp_path / 'run' / 'sft'}", name="again")
    got = again.policies["shared"].trainable_state_dict()
    assert all(torch.equal(warm[k], got[k]) for k in warm)
    metrics = again.evaluate()
    assert rows[0]["step"] == 0
    for key in ("eval/success", "eval/format_ok", "eval/reward/listener"):
        assert rows[0][key] == metrics[key]
    base = _trainer(tmp_path, name="base")  # without the warm start the evaluation differs
    assert base.evaluate()["eval/reward/listener"] != metrics["eval/reward/listener"]
    again.close()
    base.close()
    with pytest.raises(FileNotFoundError, match="weights.pt"):
        _trainer(tmp_path, f"sft.init_from={tmp_path / 'nowhere'}", name="bad")


def _fake_warm_start(trainer, path):
    """A warm start's weights file: the trainer's weights moved well away from them."""
    generator = torch.Generator().manual_seed(0)
    state = {p.name: {k: v + 0.05 * torch.randn(v.shape, generator=generator) for k, v in p.trainable_state_dict().items()}
             for p in trainer.policies}
    path.mkdir(parents=True)
    torch.save(state, path / "weights.pt")
    return state


def _reference_weights(trainer, name="shared"):
    return {k: v.detach() for k, v in trainer.policies[name].ref_model.named_parameters()}


def test_under_full_fine_tuning_the_kl_reference_is_the_warm_start(tmp_path):
    # The KL term holds the policy to where RL starts (verl's and OpenRLHF's reference is the SFT
    # model); it held it to the weights before the warm start, pulling the warm start back out.
    kl = ["train.kl_loss_coef=0.1", "run.save_every=1", "run.eval_every=-1", "run.eval_at_start=false"]
    base = _trainer(tmp_path, *kl, name="base")
    warm = _fake_warm_start(base, tmp_path / "warm")["shared"]
    base.close()
    run = _trainer(tmp_path, *kl, f"sft.init_from={tmp_path / 'warm'}", name="rl")
    reference = _reference_weights(run)
    assert all(torch.equal(reference[k], warm[k]) for k in warm)
    prompts, completions = [[3, 5, 7, 9]], [[12, 13, 2]]
    policy_lp = run.learner.logprobs("shared", prompts, completions)[0]
    assert torch.equal(run.learner.logprobs("shared", prompts, completions, reference=True)[0], policy_lp)
    run.train()  # one step, checkpointed
    assert not all(torch.equal(v, warm[k]) for k, v in run.policies["shared"].trainable_state_dict().items())
    run.close()
    # resumed, the policy is the checkpoint's and the reference still the warm start
    resumed = _trainer(tmp_path, *kl, f"sft.init_from={tmp_path / 'warm'}", "run.steps=2", name="rl", resume=True)
    assert resumed.step == 1
    reference = _reference_weights(resumed)
    assert all(torch.equal(reference[k], warm[k]) for k in warm)
    assert not all(torch.equal(v, warm[k]) for k, v in resumed.policies["shared"].trainable_state_dict().items())
    resumed.close()
    # a warm start trained in the run: the reference is its result
    trained = _trainer(tmp_path, *kl, "sft.steps=2", name="sft")
    trained.warm_start()
    reference = _reference_weights(trained)
    assert all(torch.equal(reference[k], v) for k, v in trained.policies["shared"].trainable_state_dict().items())
    trained.close()


def test_a_users_jsonl_trains_the_policy(tmp_path):
    path = tmp_path / "mine.jsonl"
    examples = [{"messages": [{"role": "user", "content": "Round 1 of 1. Target: red"},
                              {"role": "assistant", "content": "red"}]}] * 4
    write_jsonl(examples, path)
    trainer = _trainer(tmp_path, "sft.steps=5", f"sft.data={path}", "sft.batch_size=4")
    metrics = trainer.warm_start()
    assert metrics["sft/shared/tokens"] == 4 * 2  # "red" + eos in each of 4 examples
    trainer.close()
    l2 = _trainer(tmp_path, *L2, "sft.steps=1", f"sft.data={path}", name="l2")
    with pytest.raises(ValueError, match="several policies"):
        l2.warm_start()
    l2.close()


def test_config_refuses_bad_warm_start_settings():
    with pytest.raises(ValueError, match="sft.steps must be >= 0"):
        load_config(None, ["sft.steps=-1"])
    with pytest.raises(ValueError, match="init_from"):
        load_config(None, ["sft.steps=2", "sft.init_from=x"])
    with pytest.raises(ValueError, match="levels"):
        load_config(None, ["env.curriculum={option: rounds, levels: []}"])
    # demonstrations from the evaluation split: 7 of 100 prompts were evaluation prompts
    with pytest.raises(ValueError, match="sft.env_kwargs.split is 'validation' where training has 'train'"):
        load_config("reasoner_tool_l2_turn2_sft_grpo_smollm2_cpu", ["sft.env_kwargs={split: validation}"])
    load_config("reasoner_tool_l2_turn2_sft_grpo_smollm2_cpu", ["sft.env_kwargs={split: train}"])


def test_a_malformed_line_anywhere_in_a_users_file_is_refused_before_training(tmp_path):
    # Only the first line was checked: a bad line deep in the file failed mid-run (4 steps in,
    # nothing saved).
    from llm_trainers.sft import example_stream

    good = {"messages": [{"role": "user", "content": "Round 1 of 1. Target: red"}, {"role": "assistant", "content": "red"}]}
    path = tmp_path / "mine.jsonl"
    lines = [json.dumps(good)] * 4 + [json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": 7}]})]
    path.write_text("\n".join(lines) + "\n")
    cfg = load_config(None, [*BASE, "sft.steps=6", f"sft.data={path}", f"run.output_dir={tmp_path / 'run'}"])
    with pytest.raises(ValueError, match=r"mine.jsonl:5"):
        example_stream(cfg)


def test_a_users_file_naming_an_unknown_agent_is_refused_and_skipped_examples_are_counted(tmp_path):
    # Examples of a misspelt agent ("listner") were dropped without a word: the run trained the
    # speaker alone and said nothing.
    good = list(iter_demonstrations("llm/Signalling-v0", SIGNALLING, episodes=2))
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({"messages": e["messages"], "agent": e["agent"].replace("listener", "listner")}) + "\n"
                            for e in good))
    trainer = _trainer(tmp_path, "sft.steps=2", f"sft.data={path}")
    with pytest.raises(ValueError, match="agent 'listner', which llm/Signalling-v0 does not have"):
        trainer.warm_start()
    # an agent that exists but does not learn (a fixed opponent) is skipped, and counted
    path.write_text("".join(json.dumps({"messages": e["messages"], "agent": e["agent"]}) + "\n" for e in good))
    trainer = _trainer(tmp_path, "sft.steps=2", f"sft.data={path}", "env.opponents={listener: reference}", name="opp")
    metrics = trainer.warm_start()
    assert metrics["sft/skipped_no_policy"] > 0, metrics
    assert [k for k in metrics if k.endswith("/loss")] == ["sft/shared/loss"], metrics  # the speaker learns


# ---------------------------------------------------------------------- curriculum


def test_set_option_sets_nested_options_on_a_copy():
    kwargs = {"task_kwargs": {"level": 1, "x": 2}, "split": "train"}
    out = set_option(kwargs, "task_kwargs.level", 3)
    assert out == {"task_kwargs": {"level": 3, "x": 2}, "split": "train"}
    assert kwargs["task_kwargs"]["level"] == 1
    assert set_option({}, "rows", 4) == {"rows": 4}
    with pytest.raises(ValueError, match="not a mapping"):
        set_option({"split": "train"}, "split.x", 1)


def test_curriculum_moves_up_on_the_threshold_and_is_checkpointed(tmp_path):
    up = ["env.curriculum={option: rounds, levels: [1, 3], metric: turns, threshold: 1.0, patience: 2}",
          "run.steps=3", "run.save_every=1", "run.eval_every=-1"]
    trainer = _trainer(tmp_path, *up)
    assert trainer.envs[0].config.rounds == 1
    trainer.train(until_step=1)
    assert trainer.curriculum_index == 0 and trainer.curriculum_streak == 1  # one episode of 1 turn
    trainer.train(until_step=2)
    assert trainer.curriculum_index == 1 and trainer.envs[0].config.rounds == 3
    trainer.close()
    resumed = _trainer(tmp_path, *up, resume=True)
    assert resumed.curriculum_index == 1 and resumed.envs[0].config.rounds == 3
    resumed.close()
    stay = _trainer(tmp_path, *up[1:], "env.curriculum={option: rounds, levels: [1, 3], threshold: 2.0}", name="stay")
    stay.train()
    assert stay.curriculum_index == 0 and stay.envs[0].config.rounds == 1
    stay.close()


# ---------------------------------------------------------------------- llm-train


def test_llm_train_exports_demonstrations_and_runs_the_warm_start_alone(tmp_path, capsys):
    from llm_trainers.cli import main

    args = [*BASE, f"run.output_dir={tmp_path / 'run'}"]
    out = tmp_path / "demos.jsonl"
    assert main(["signalling_at_grpo_l1", *args, "sft.agents=[listener]", "--export-demonstrations", str(out),
                 "--episodes", "3"]) == 0
    rows = list(read_jsonl(out))
    assert len(rows) == 6 and {r["agent"] for r in rows} == {"listener"}
    # a refused export leaves no file (an empty one was left) and keeps an older one whole
    refused = tmp_path / "refused.jsonl"
    for target in (refused, out):
        assert main(["signalling_at_grpo_l1", *args, "sft.agents=[listner]", "--export-demonstrations", str(target),
                     "--episodes", "3"]) == 2
    assert not refused.exists() and len(list(read_jsonl(out))) == 6
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tmp") == []
    assert main(["signalling_at_grpo_l1", *args, "sft.steps=2", "--sft-only"]) == 0
    assert (tmp_path / "run" / "sft" / "done").is_file() and not (tmp_path / "run" / "checkpoints").exists()
    # resumed after the warm start (no RL step yet), the policies hold the warm-started weights
    resumed = Trainer(load_config("signalling_at_grpo_l1", [*args, "sft.steps=2"]), resume=True)
    warm = torch.load(tmp_path / "run" / "sft" / "weights.pt")["shared"]
    got = resumed.policies["shared"].trainable_state_dict()
    assert all(torch.equal(warm[k], got[k]) for k in warm)
    resumed.close()
    # the directory now holds a run: a second start needs --resume (RL from the warm start) or --overwrite
    assert main(["signalling_at_grpo_l1", *args, "sft.steps=2"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["signalling_at_grpo_l1", *args, "sft.steps=0", "--sft-only", "--overwrite"]) == 2
    assert "sft.steps > 0" in capsys.readouterr().err


def test_arithmetic_level_0_is_single_digit_and_opt_in():
    import re

    from llm_envs.tasks.arithmetic import LEVELS, ArithmeticSource
    from llm_envs.verifiers.math import check_answer, extract_boxed

    assert 0 not in LEVELS and 0 not in ArithmeticSource("train").levels  # not drawn unless named
    source = ArithmeticSource("validation", level=0)
    for i in range(30):
        problem = source.get(i)
        a, op, b = re.search(r"(\d+) ([+−×]) (\d+)", problem.prompt).groups()
        assert int(a) <= 9 and int(b) <= 9 and problem.metadata["level"] == 0
        expected = {"+": int(a) + int(b), "−": int(a) - int(b), "×": int(a) * int(b)}[op]
        assert check_answer(str(expected), problem.answer) and extract_boxed(problem.solution) == problem.answer
