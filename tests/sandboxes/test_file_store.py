"""Large files sent to a worker once and then named (sandboxes.pool.FileStore): every run still
gets the whole file, written afresh, whatever an earlier run did to its copy; and what the
router remembers about a large file routes it as before."""

from __future__ import annotations

import hashlib

import pytest

from sandboxes.pool import PreloadRouter
from tests.sandboxes.conftest import make

# A program that reports the file's digest and size, then overwrites its own copy.
_READ_THEN_SPOIL = """
import hashlib, os
data = open("blob.bin", "rb").read()
print(hashlib.sha256(data).hexdigest(), len(data))
os.chmod("blob.bin", 0o600)
with open("blob.bin", "wb") as fh:
    fh.write(b"spoiled")
"""


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_a_stored_file_reaches_every_run_whole_and_fresh(backend):
    blob = bytes(range(256)) * 256  # 64 KiB: over the store's threshold
    expected = f"{hashlib.sha256(blob).hexdigest()} {len(blob)}"
    with make(backend, pool_size=1) as sandbox:
        store = sandbox._pool.light.file_store
        outputs = [sandbox.run(_READ_THEN_SPOIL, files={"blob.bin": blob}) for _ in range(4)]
        (worker,) = sandbox._pool.light._all
        assert [r.stdout.strip() for r in outputs] == [expected] * 4, [r.stderr for r in outputs]
        assert all(r.ok for r in outputs)
        file_id = store.file_id(blob)
        assert file_id is not None and file_id in worker.stored_files  # runs 3 and 4 named it
        # Another content under the same name is sent as itself, never the stored one.
        other = bytes(reversed(blob))
        run = sandbox.run(_READ_THEN_SPOIL, files={"blob.bin": other})
        assert run.stdout.strip() == f"{hashlib.sha256(other).hexdigest()} {len(other)}"


def test_frames_name_a_file_the_worker_holds_and_carry_it_otherwise():
    from sandboxes.pool import FileStore

    class FakeWorker:  # only the bookkeeping the store reads and writes
        stored_files: set = set()
        stored_bytes = 0

    store = FileStore(min_bytes=10, worker_budget=100)
    worker = FakeWorker()
    worker.stored_files = set()
    big, small = b"x" * 60, b"tiny"
    job = {"id": "j", "source": "pass"}
    first = store.job_frame(job, {"a": big, "b": small}, worker)
    assert first["files"] == {"a": big.hex(), "b": small.hex()} and "keep_files" not in first  # seen once
    second = store.job_frame(job, {"a": big}, worker)
    assert second["files"] == {"a": big.hex()} and set(second["keep_files"]) == {"a"}
    third = store.job_frame(job, {"renamed": big}, worker)
    assert third["files"] == {} and third["stored_files"] == {"renamed": second["keep_files"]["a"]}
    # Over the worker's budget a file is carried inline every time.
    other = b"y" * 60
    store.job_frame(job, {"c": other}, worker)
    over = store.job_frame(job, {"c": other}, worker)
    assert over["files"] == {"c": other.hex()} and "keep_files" not in over
    assert worker.stored_bytes == 60


def test_the_remembered_routing_of_a_large_file_is_the_searched_one():
    router = PreloadRouter(lambda modules: None, preload=["json"], heavy_preload=["numpy"], size=1,
                           max_jobs_per_worker=1, backend="test")
    heavy = b"#" * 5000 + b"\nimport numpy as np\n"
    light = b"#" * 5000 + b"\nimport json\n"
    for _ in range(2):  # searched, then remembered
        assert router.pool_for("pass", {"f.py": heavy}) is router.heavy
        assert router.pool_for("pass", {"f.py": light}) is router.light
