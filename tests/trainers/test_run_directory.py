"""The run directory's safety: what a resume is checked against, the lock against a second
process, --overwrite, TensorBoard and W&B on a resume, interrupted and failed checkpoint saves,
checksummed checkpoint parts, and the messages of a resume with nothing to resume."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
import yaml

from llm_trainers import checkpoint
from llm_trainers.checkpoint import CheckpointError, CheckpointSaveError, RunDirectoryLocked, load_checkpoint
from llm_trainers.cli import main
from llm_trainers.config import load_config
from llm_trainers.trainer import Trainer, remove_run

BASE = [
    "model.path=tiny:llm/Signalling-v0",
    "model.device=cpu",
    "rollout.max_new_tokens=1",
    "rollout.k=2",
    "env.num_envs=2",
    "run.steps=1",
    "run.eval_every=-1",
    "run.eval_at_start=false",
    "run.save_every=1",
    "run.progress=false",
    "run.tensorboard=false",
    "run.export_final=false",
    "train.lr=5e-3",
]
# The CLI's shipped config, as small as it goes.
CLI = ["signalling_at_grpo_l1", "run.steps=1", "run.save_every=1", "run.eval_every=-1", "run.eval_at_start=false",
       "run.progress=false", "env.num_envs=2", "rollout.k=2", "rollout.max_new_tokens=1"]
ROOT = Path(__file__).resolve().parents[2]


def _trained(out: Path, *extra: str) -> None:
    trainer = Trainer(load_config(None, [*BASE, *extra, f"run.output_dir={out}"]))
    trainer.train()
    trainer.close()


def _resave(ckpt: Path, change) -> None:  # noqa: ANN001 - a function of the parts
    """Write checkpoint ``ckpt`` again with its parts changed (so its manifest matches them)."""
    parts = load_checkpoint(ckpt)
    change(parts)
    checkpoint.save_checkpoint(ckpt.parent, int(ckpt.name.split("_")[1]), parts)


# ---------------------------------------------------------------------------- what a resume is checked against
def test_a_resume_is_checked_against_the_checkpoints_own_config(tmp_path):
    """Without config.yaml (checkpoints copied to another output_dir) a resume with another lr
    and environment was accepted and config.yaml written with them; the config stored in the
    checkpoint is what the run was made with, and a hand-edited config.yaml does not change it."""
    out = tmp_path / "run"
    _trained(out)
    ckpt = out / "checkpoints" / "step_00000001"
    own = (out / "config.yaml").read_text()
    (out / "config.yaml").unlink()
    with pytest.raises(ValueError, match=r"as stored in checkpoint .*step_00000001.*train\.lr: 0\.005 -> 0\.5"):
        Trainer(load_config(None, [*BASE, f"run.output_dir={out}", "run.steps=2", "train.lr=0.5"]), resume=True)
    assert not (out / "config.yaml").exists()  # nothing claims the new settings

    assert "  lr: 0.005\n" in own
    (out / "config.yaml").write_text(own.replace("  lr: 0.005\n", "  lr: 0.5\n"))  # edited by hand
    with pytest.raises(ValueError, match=r"train\.lr: 0\.005 -> 0\.5"):
        Trainer(load_config(None, [*BASE, f"run.output_dir={out}", "run.steps=2", "train.lr=0.5"]), resume=True)

    # A checkpoint written before checkpoints kept their config, and no config.yaml: nothing to
    # check against, refused (it was accepted, whatever the settings).
    _resave(ckpt, lambda parts: parts["state"].pop("config"))
    (out / "config.yaml").unlink()
    with pytest.raises(ValueError, match="nothing to check this resume's settings against.*config.yaml is missing"):
        Trainer(load_config(None, [*BASE, f"run.output_dir={out}", "run.steps=2"]), resume=True)
    # ... with the run's config.yaml back, it resumes (only run.steps differs)
    (out / "config.yaml").write_text(own)
    resumed = Trainer(load_config(None, [*BASE, f"run.output_dir={out}", "run.steps=2"]), resume=True)
    assert resumed.step == 1
    resumed.close()


def test_the_cli_refuses_such_a_resume_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*CLI, f"run.output_dir={out}"]) == 0
    capsys.readouterr()
    (out / "config.yaml").unlink()
    assert main([*CLI, f"run.output_dir={out}", "run.steps=2", "train.lr=0.5", "rollout.k=3", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "llm-train: error: --resume: the run in" in err and "rollout.k: 2 -> 3; train.lr:" in err
    assert "Traceback" not in err and not (out / "config.yaml").exists()


# ---------------------------------------------------------------------------- the lock
def test_a_second_process_is_refused_the_run_directory(tmp_path, capsys):
    """Two processes resuming one run both trained the same steps and replaced each other's
    checkpoints: the second is refused at once, in one line, until the first is gone (even when
    it was killed: the kernel drops its lock)."""
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from llm_trainers.checkpoint import lock_run_directory; "
         f"lock_run_directory({str(out)!r}); print('locked', flush=True); sys.stdin.read()"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    try:
        assert holder.stdout.readline().strip() == "locked"
        for argv in ([*CLI, f"run.output_dir={out}", "--resume"], [*CLI, f"run.output_dir={out}", "--overwrite"]):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert f"llm-train: error: {out} is in use by another process (pid {holder.pid} on " in err, err
            assert len(err.strip().splitlines()) == 1
        with pytest.raises(RunDirectoryLocked, match=f"pid {holder.pid}"):
            Trainer(load_config(None, [*BASE, f"run.output_dir={out}"]))
        assert not (out / "config.yaml").exists()  # refused before anything was written
    finally:
        holder.kill()  # SIGKILL: no clean-up of its own
        holder.wait()
    trainer = Trainer(load_config(None, [*BASE, f"run.output_dir={out}"]))  # the lock went with the process
    trainer.close()


def test_the_lock_is_reentrant_in_one_process_and_released(tmp_path):
    first = checkpoint.lock_run_directory(tmp_path)
    second = checkpoint.lock_run_directory(tmp_path)  # the CLI's, then its Trainer's
    first.release()
    first.release()  # once only
    probe = [sys.executable, "-c", f"from llm_trainers.checkpoint import lock_run_directory; lock_run_directory({str(tmp_path)!r})"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    assert subprocess.run(probe, cwd=ROOT, env=env, capture_output=True).returncode != 0  # still held
    second.release()
    assert subprocess.run(probe, cwd=ROOT, env=env, capture_output=True).returncode == 0


# ---------------------------------------------------------------------------- --overwrite, TensorBoard, W&B
def test_overwrite_removes_everything_the_old_run_wrote_and_nothing_else(tmp_path, capsys):
    """--overwrite kept the old run's W&B id (the new run went into the old W&B run), its
    TensorBoard events (both runs shown as one), its final/ weights and its tiny model."""
    out = tmp_path / "run"
    assert main([*CLI, f"run.output_dir={out}", "run.tensorboard=true", "run.export_final=true"]) == 0
    (out / "wandb_run_id").write_text("0ld1d000\n")
    (out / "wandb" / "offline-run-x").mkdir(parents=True)
    (out / "notes.txt").write_text("mine\n")
    for name in ("tensorboard", "final", "tiny_model", "checkpoints", "metrics.jsonl", "report.html"):
        assert (out / name).exists(), name
    capsys.readouterr()
    assert main([*CLI, f"run.output_dir={out}", "run.tensorboard=false", "run.export_final=false", "train.lr=0.05",
                 "--overwrite"]) == 0
    assert "--overwrite: removed the previous run's" in capsys.readouterr().err
    for name in ("tensorboard", "final", "wandb", "wandb_run_id"):
        assert not (out / name).exists(), name
    assert (out / "notes.txt").read_text() == "mine\n"  # not the run's
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["lr"] == 0.05
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1]


def test_remove_run_takes_the_files_the_environment_wrote_inside_the_run_only(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    elsewhere = tmp_path / "shared_pool.jsonl"
    for path in (out / "question_pool.jsonl", out / "eval_pool.jsonl", elsewhere, out / "data.jsonl"):
        path.write_text("{}\n")
    (out / "config.yaml").write_text(yaml.safe_dump({"env": {
        "kwargs": {"pool_path": "{output_dir}/question_pool.jsonl", "task_path": "{output_dir}/data.jsonl"},
        "eval_kwargs": {"pool_path": str(out / "eval_pool.jsonl")}}, "sft": {"env_kwargs": {"pool_path": str(elsewhere)}}}))
    (out / checkpoint.LOCK_FILE).write_text("")
    (out / "eval").mkdir()
    (out / "eval" / "step_00000001.jsonl").write_text("{}\n")
    (out / "eval" / "my_notes.md").write_text("mine\n")  # a folder of a common name: only the run's files go
    (out / "tensorboard").mkdir()
    (out / "tensorboard" / "events.out.tfevents.1.host.1.0").write_bytes(b"")
    assert sorted(remove_run(out)) == ["config.yaml", "eval/step_*.jsonl", "eval_pool.jsonl", "question_pool.jsonl",
                                       "tensorboard"]
    assert elsewhere.exists() and (out / "data.jsonl").exists() and (out / checkpoint.LOCK_FILE).exists()
    assert [p.name for p in (out / "eval").iterdir()] == ["my_notes.md"] and not (out / "tensorboard").exists()


def test_a_resume_hides_the_tensorboard_events_logged_after_its_checkpoint(tmp_path):
    """metrics.jsonl is cut back to the checkpoint on a resume; the TensorBoard events of the
    steps after it stayed, and the steps run again were shown twice."""
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    cfg = [*BASE, "run.steps=4", "run.save_every=2", "run.tensorboard=true", f"run.output_dir={tmp_path}"]
    first = Trainer(load_config(None, cfg))
    first.train(until_step=3)  # step 3 logged, its checkpoint never written
    first.close()
    resumed = Trainer(load_config(None, cfg), resume=True)
    assert resumed.step == 2
    resumed.train()
    resumed.close()
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    logged = {json.loads(line)["step"]: json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()}
    events = acc.Scalars("rollout/record_reward")
    assert [e.step for e in events] == [1, 2, 3, 4]
    assert [e.value for e in events] == pytest.approx([logged[s]["rollout/record_reward"] for s in (1, 2, 3, 4)])


def test_only_a_resumed_run_continues_the_wandb_run(tmp_path, monkeypatch):
    from llm_trainers.metrics import WandbSettings, _start_wandb

    calls = []
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=lambda **kw: calls.append(kw["id"])))
    (tmp_path / "wandb_run_id").write_text("0ld1d000\n")
    _start_wandb(WandbSettings("offline", "p", "n", str(tmp_path), {}, continue_run=True))
    _start_wandb(WandbSettings("offline", "p", "n", str(tmp_path), {}, continue_run=False))
    assert calls[0] == "0ld1d000" and calls[1] != "0ld1d000"
    assert (tmp_path / "wandb_run_id").read_text().strip() == calls[1]


# ---------------------------------------------------------------------------- interrupted and failed saves
def _parts() -> dict:
    return {"policies": {"shared": {"w": torch.ones(64, 64)}}, "learner": {}, "state": {"step": 1}}


def test_the_next_save_removes_what_interrupted_saves_left(tmp_path):
    """A kill -9 during a save left .step_N.tmp<pid>/ (up to a checkpoint's size) for ever: only
    the same pid's was removed, and pruning looked at step_* only."""
    checkpoint.save_checkpoint(tmp_path, 1, _parts())
    (tmp_path / ".step_00000002.tmp999999").mkdir()
    (tmp_path / ".step_00000002.tmp999999" / "policies.pt").write_bytes(b"partial")
    (tmp_path / "latest.tmp999999").write_text("step_00000002")
    (tmp_path / "step_notes").mkdir()  # not a temporary of a save: stays
    checkpoint.save_checkpoint(tmp_path, 3, _parts())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step_00000001", "step_00000003", "step_notes"]


def test_a_failed_save_removes_its_files_and_says_why(tmp_path, monkeypatch):
    checkpoint.save_checkpoint(tmp_path, 1, _parts())
    real, calls = torch.save, []

    def full_disk(obj, f):
        calls.append(1)
        if len(calls) == 2:
            f.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        real(obj, f)

    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(CheckpointSaveError, match=r"cannot write checkpoint step_00000002 under .*No space left on "
                                                  r"device \(\d+ MiB free there\)"):
        checkpoint.save_checkpoint(tmp_path, 2, _parts())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step_00000001"]
    assert checkpoint.latest_checkpoint(tmp_path).name == "step_00000001"


def test_a_trainer_starting_removes_what_interrupted_saves_left(tmp_path):
    _trained(tmp_path)
    stale = [tmp_path / "checkpoints" / ".step_00000002.tmp999999", tmp_path / "sft" / "checkpoints" / ".step_00000003.tmp9"]
    for path in stale:
        path.mkdir(parents=True)
    (tmp_path / "checkpoints" / "latest.tmp999999").write_text("x")
    resumed = Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path}"]), resume=True)
    resumed.close()
    assert not any(p.exists() for p in stale) and not (tmp_path / "checkpoints" / "latest.tmp999999").exists()


def test_the_cli_reports_a_save_that_failed_in_one_line_with_the_resume_command(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    real, calls = torch.save, []

    def full_disk(obj, f):
        calls.append(1)
        if len(calls) == 4:  # the checkpoint of step 2, its first part
            raise OSError(errno.ENOSPC, "No space left on device")
        real(obj, f)

    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    assert main([*CLI, f"run.output_dir={out}", "run.steps=3"]) == 3
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("llm-train: error at step 2: cannot write checkpoint step_00000002 under"), err
    assert "No space left on device" in last and f"continue from {out / 'checkpoints' / 'step_00000001'}" in last
    assert last.endswith("--resume") and "Traceback" not in err
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["latest", "step_00000001"]


# ---------------------------------------------------------------------------- checksums
def test_a_part_whose_bytes_changed_is_refused_and_an_older_checkpoint_still_loads(tmp_path):
    """One flipped bit in a tensor's data loaded silently (torch.load checks no checksum)."""
    path = checkpoint.save_checkpoint(tmp_path, 1, _parts())
    part = path / "policies.pt"
    data = bytearray(part.read_bytes())
    i = data.find(torch.ones(1).numpy().tobytes(), len(data) // 2)
    data[i + 3] ^= 0x40  # 1.0 -> inf
    part.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"cannot read {part}: its bytes differ from those written"):
        load_checkpoint(path)
    manifest = json.loads((path / checkpoint.MANIFEST).read_text())
    assert set(manifest["parts"]) == {"policies.pt", "learner.pt", "state.pt"}
    assert load_checkpoint(path, parts=("state",))["state"] == {"step": 1}  # only what is asked is read
    (path / checkpoint.MANIFEST).unlink()  # a checkpoint from before manifests: loaded unchecked
    assert torch.isinf(load_checkpoint(path)["policies"]["shared"]["w"]).sum() == 1
    path = checkpoint.save_checkpoint(tmp_path, 2, _parts())
    (path / "learner.pt").unlink()
    with pytest.raises(CheckpointError, match="lacks learner.pt, which its manifest.json lists"):
        load_checkpoint(path)


def test_the_cli_refuses_a_damaged_checkpoint_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*CLI, f"run.output_dir={out}"]) == 0
    capsys.readouterr()
    part = out / "checkpoints" / "step_00000001" / "learner.pt"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.write_bytes(bytes(data))
    assert main([*CLI, f"run.output_dir={out}", "run.steps=2", "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"llm-train: error: cannot read {part}: its bytes differ from those written" in err
    assert "Traceback" not in err


# ---------------------------------------------------------------------------- nothing to resume
def test_a_resume_with_nothing_to_resume_says_so(tmp_path, capsys):
    """It said "cannot load the model: --resume: no checkpoint under ..."; the model was fine."""
    for out in (tmp_path / "empty", tmp_path / "missing"):
        if out.name == "empty":
            out.mkdir()
        assert main([*CLI, f"run.output_dir={out}", "--resume"]) == 2
        err = capsys.readouterr().err
        assert f"llm-train: error: --resume: {out} holds no run to continue" in err and "start the run without --resume" in err
        assert "cannot load the model" not in err
    assert not (tmp_path / "missing").exists()
    with pytest.raises(FileNotFoundError, match="holds no run to continue"):  # the API's error, as before
        Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path / 'empty'}"]), resume=True)
    # (a warm start named by sft.init_from that is not there is a setting, not a model to load)
    assert main([*CLI, f"run.output_dir={tmp_path / 'other'}", f"sft.init_from={tmp_path / 'nowhere'}"]) == 2
    err = capsys.readouterr().err
    assert "llm-train: error: sft.init_from: no warm-start weights at" in err and "cannot load the model" not in err
