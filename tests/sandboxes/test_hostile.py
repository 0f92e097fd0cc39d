"""A run against its worker, its siblings, earlier and later runs: each test is the attack.

Every test runs on each backend that claims containment (bwrap, process, and docker where an
engine answers). A program tries to read, steal from, signal, slow down or outlive its worker,
to leave something for the next run, or to hold more than its budget; the test then checks the
effect on what matters: the result of this run and of later runs, the worker (not replaced),
and what is left. Most tests use one worker (``pool_size=1``) so that "the next run" is served
by the same worker as the attack.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import uuid
from collections.abc import Iterator

import pytest

import sandboxes
from sandboxes import Job, Limits, RunResult
from sandboxes.core import Sandbox
from tests.sandboxes.conftest import ISOLATED_BACKENDS, make

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", params=ISOLATED_BACKENDS)
def solo(request) -> Iterator[Sandbox]:
    """One warm worker per backend, so consecutive runs share it."""
    sandbox = make(request.param, pool_size=1)
    assert sandbox.run("pass").ok  # its worker is up: later replacements show in workers_started
    yield sandbox
    sandbox.close()


def _report(res: RunResult) -> dict:
    """The JSON object an attack program prints on its last line."""
    assert res.sandbox_error is None, res
    lines = res.stdout.strip().splitlines()
    assert lines, res
    return json.loads(lines[-1])


def _healthy(sandbox: Sandbox, started_before: int) -> None:
    """The next run gets a correct result from the same worker (none was replaced)."""
    res = sandbox.run("import sys\nprint(6 * 7)\nsys.exit(5)")
    assert res.stdout == "42\n" and res.exit_code == 5 and res.sandbox_error is None, res
    assert sandbox.workers_started == started_before, "the attack cost its worker"


# A program's view of the processes it may not touch: everything in /proc but itself. Under
# docker and bwrap that is the worker (pid 1) and its zygote; its parent is the zygote.
_OTHERS = """
import os
ME = os.getpid()
OTHERS = sorted({os.getppid(), 1} | {int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != ME} - {0, ME})
"""


# ---------------------------------------------------------------------------------------------
# the worker's memory, descriptors and identity
# ---------------------------------------------------------------------------------------------


def test_worker_proc_files_are_closed_to_the_program(solo):
    # Issue 11 (1): open('/proc/%d/mem' % os.getppid(), 'r+b') succeeded on the worker.
    program = _OTHERS + r"""
import json
opened = []
for pid in OTHERS:
    for name, how in (("mem", "r+b"), ("mem", "rb"), ("environ", "rb"), ("auxv", "rb"), ("maps", "rb"),
                      ("syscall", "rb"), ("stack", "rb"), ("fd/0", "wb"), ("fd/1", "wb"), ("fd/3", "wb"),
                      ("fd/4", "wb"), ("fd/5", "wb")):
        try:
            with open("/proc/%d/%s" % (pid, name), how) as fh:
                if "r" in how:
                    fh.read(1)
            opened.append("%d/%s" % (pid, name))
        except OSError:
            pass
    for name in ("fd", "root", "cwd", "map_files"):
        try:
            os.listdir("/proc/%d/%s" % (pid, name))
            opened.append("%d/%s" % (pid, name))
        except OSError:
            pass
print(json.dumps({"others": OTHERS, "opened": opened}))
"""
    started = solo.workers_started
    report = _report(solo.run(program))
    assert report["opened"] == [], report
    _healthy(solo, started)


def test_process_vm_and_pidfd_getfd_are_denied(solo):
    # Issue 11 (1, 2): process_vm_readv/writev on the worker, pidfd_getfd(pidfd_open(ppid), 4)
    # handed the program the worker's pipe to the host. Every fd number is tried, and whatever
    # is obtained is used to forge this run's result and poison the next ones.
    program = _OTHERS + r"""
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
probe = ctypes.create_string_buffer(64)
address = id(sys.modules)  # a fork shares its parent's layout: the same address is mapped there
local, remote = iovec(ctypes.addressof(probe), 64), iovec(address, 64)
got = []
forged = json.dumps({"stdout": "FORGED\n", "stderr": "", "stdout_truncated": False, "stderr_truncated": False,
                     "exit_code": 0, "timed_out": False, "oom": False, "duration_s": 0.0, "worker_clean": True,
                     "leftover_processes": 0}).encode()
frame = len(forged).to_bytes(4, "big") + forged
for pid in OTHERS:
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
        got.append("process_vm_readv %d" % pid)
        if libc.process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
            got.append("process_vm_writev %d" % pid)
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    if pidfd >= 0:
        got.append("pidfd_open %d" % pid)
        for fd in range(64):
            stolen = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
            if stolen >= 0:
                got.append("pidfd_getfd %d:%d" % (pid, fd))
                for _ in range(3):
                    try:
                        os.write(stolen, frame)
                    except OSError:
                        break
print(json.dumps({"got": got}))
sys.exit(3)
"""
    started = solo.workers_started
    res = solo.run(program)
    assert res.exit_code == 3 and "FORGED" not in res.stdout, res
    assert _report(res)["got"] == []
    for i in range(3):  # later runs get their own results
        later = solo.run(f"print({i})")
        assert later.stdout == f"{i}\n" and later.ok, later
    _healthy(solo, started)


def test_ptrace_and_kcmp_are_denied(solo):
    program = _OTHERS + r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
got = []
for pid in OTHERS:
    for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
        if libc.ptrace(request, pid, 0, 0) == 0:
            got.append("ptrace %d %d" % (request, pid))
    if libc.syscall(312, os.getpid(), pid, 0, 0, 0) >= 0:  # kcmp(KCMP_FILE)
        got.append("kcmp %d" % pid)
print(json.dumps({"got": got}))
"""
    started = solo.workers_started
    assert _report(solo.run(program))["got"] == []
    _healthy(solo, started)


def test_signals_cannot_reach_the_worker(solo):
    # SIGSTOP would hang the worker, SIGKILL or an unhandled SIGINT/SIGTERM kill it; kill(-1)
    # reaches every process of the caller's uid; pidfd_send_signal works on a pidfd or a
    # /proc/<pid> directory.
    program = _OTHERS + r"""
import ctypes, json, signal, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
sent = []
for sig in (signal.SIGSTOP, signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGALRM, signal.SIGKILL):
    for pid in OTHERS:
        for how, call in (("kill", lambda: os.kill(pid, sig)), ("killpg", lambda: os.killpg(os.getpgid(pid), sig)),
                          ("tgkill", lambda: signal.pthread_kill and libc.syscall(234, pid, pid, sig) == 0 or (_ for _ in ()).throw(OSError())),
                          ("pidfd", lambda: libc.syscall(424, os.open("/proc/%d" % pid, os.O_RDONLY), sig, 0, 0) == 0 or (_ for _ in ()).throw(OSError()))):
            try:
                call()
                sent.append("%s %d %d" % (how, pid, sig))
            except OSError:
                pass
try:
    os.kill(-1, signal.SIGKILL)
    sent.append("kill(-1)")
except OSError:
    pass
time.sleep(0.3)
print(json.dumps({"sent": sent}))
"""
    started = solo.workers_started
    res = solo.run(program, limits=Limits(time_s=10))
    assert _report(res)["sent"] == [] and res.ok, res
    _healthy(solo, started)


# Signal redirection (issue 22): F_SETOWN/F_SETOWN_EX/F_SETSIG on a descriptor, or FIOSETOWN /
# SIOCSPGRP on a socket, makes the kernel signal the owner when I/O happens on it, with only the
# setter's uid checked, at delivery. With O_ASYNC on its own stdout pipe, which the worker reads,
# a run sharing its worker's uid had the zygote SIGKILLed or SIGSTOPped: an infrastructure
# failure on demand instead of its own 0.
SIGNAL_REDIRECTION = r"""
import fcntl, json, os, signal, socket, struct, time
me = os.getpid()
others = sorted({os.getppid(), 1} | {int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me} - {0, me})
F_SETOWN, F_SETSIG, F_SETOWN_EX, F_OWNER_PID, F_OWNER_PGRP = 8, 10, 15, 1, 2
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
near, far = socket.socketpair()
got = []
def attempt(what, call):
    try:
        call()
        got.append(what)
    except OSError:
        pass
for fd in (0, 1, 2, near.fileno()):
    for pid in others:
        attempt("F_SETOWN %d %d" % (fd, pid), lambda: fcntl.fcntl(fd, F_SETOWN, pid))
        attempt("F_SETOWN pgrp %d %d" % (fd, pid), lambda: fcntl.fcntl(fd, F_SETOWN, -pid))
        for kind in (F_OWNER_PID, F_OWNER_PGRP):
            attempt("F_SETOWN_EX %d %d" % (fd, pid), lambda: fcntl.fcntl(fd, F_SETOWN_EX, struct.pack("ii", kind, pid)))
    for sig in (signal.SIGKILL, signal.SIGSTOP):
        attempt("F_SETSIG %d %d" % (fd, sig), lambda: fcntl.fcntl(fd, F_SETSIG, sig))
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
    except OSError:
        pass
for pid in others:
    for request in (FIOSETOWN, SIOCSPGRP):
        attempt("ioctl %x %d" % (request, pid), lambda: fcntl.ioctl(near.fileno(), request, struct.pack("i", pid)))
for _ in range(30):  # I/O on every descriptor: the worker reads the pipes, the socket gets data
    os.write(1, b"." * 1000 + b"\n")
    os.write(2, b"-\n")
    far.send(b"x")
    near.recv(1)
    time.sleep(0.005)
print(json.dumps({"got": got}))
"""


def test_signal_redirection_cannot_reach_the_worker(solo):
    started = solo.workers_started
    res = solo.run(SIGNAL_REDIRECTION, limits=Limits(time_s=20))
    assert res.sandbox_error is None and res.ok, res
    assert _report(res)["got"] == [], res
    _healthy(solo, started)


def test_a_run_cannot_read_back_its_own_output(solo):
    # A run whose uid owned its stdout pipe (the docker worker's, and every run without root)
    # reopened /proc/self/fd/1 for reading and took out of the pipe what its other processes
    # wrote before the worker read it: the function harness's records and their secret, to forge
    # passes. A child writes; the parent tries every way back to the bytes.
    program = r"""
import json, os, time
got = []
child = os.fork()
if child == 0:
    os.write(1, b"SECRET-RECORD\n")
    os._exit(0)
os.waitpid(child, 0)
time.sleep(0.2)
for fd in (1, 2):
    for how in (os.O_RDONLY, os.O_RDWR):
        try:
            reopened = os.open("/proc/self/fd/%d" % fd, how | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            got.append(os.read(reopened, 100).decode())
        except OSError:
            got.append("reopened %d" % fd)
    try:
        os.set_blocking(fd, False)
        got.append(os.read(fd, 100).decode())
    except OSError:
        pass
print(json.dumps({"got": [g for g in got if g]}))
"""
    started = solo.workers_started
    res = solo.run(program)
    assert "SECRET-RECORD" in res.stdout and _report(res)["got"] == [], res
    _healthy(solo, started)


def test_out_of_band_bytes_on_the_output_cannot_stall_the_worker(solo):
    # One MSG_OOB byte on the run's stdout socket made select() say readable while a plain read
    # skipped it and blocked: the worker stopped enforcing the time and memory limits, and the
    # run ended as a sandbox failure (an unscored episode on demand) after the host's grace.
    send_oob = (
        "import os, socket, time\n"
        "for fd in (1, 2):\n"
        "    s = socket.socket(fileno=os.dup(fd))\n"
        "    s.send(b'!', socket.MSG_OOB)\n"
        "    s.detach()\n"
    )
    started = solo.workers_started
    res = solo.run(send_oob + "print('done')")
    assert res.ok and res.stdout.endswith("done\n") and res.sandbox_error is None, res  # the byte reads inline
    _healthy(solo, started)
    # (a run that reaches its time or memory limit costs its worker, as any such run does)
    slow = solo.run(send_oob + "time.sleep(30)", limits=Limits(time_s=1))
    assert slow.timed_out and slow.sandbox_error is None and slow.duration_s < 10, slow
    hungry = solo.run(send_oob + "x = bytearray(256 << 20)\nx[::4096] = b'x' * len(x[::4096])\ntime.sleep(30)",
                      limits=Limits(memory_mb=64, time_s=10))
    assert hungry.oom and hungry.sandbox_error is None, hungry
    assert solo.run("print(6 * 7)").stdout == "42\n"


def test_worker_limits_priority_and_cpus_cannot_be_changed(solo):
    # prlimit, setpriority and sched_setaffinity need only the same uid (no ptrace access): a
    # run could have starved or crippled every later run of its worker.
    program = _OTHERS + r"""
import json, resource
changed = []
for pid in OTHERS:
    for name, call in (
        ("prlimit NOFILE", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (8, 8))),
        ("prlimit AS", lambda: resource.prlimit(pid, resource.RLIMIT_AS, (64 << 20, 64 << 20))),
        ("prlimit NPROC", lambda: resource.prlimit(pid, resource.RLIMIT_NPROC, (1, 1))),
        ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
        ("setpriority group", lambda: os.setpriority(os.PRIO_PGRP, os.getpgid(pid), 19)),
        ("sched_setaffinity", lambda: os.sched_setaffinity(pid, {0})),
        ("sched_setscheduler", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))),
    ):
        try:
            call()
            changed.append("%s %d" % (name, pid))
        except (OSError, ValueError):
            pass
try:
    os.setpriority(os.PRIO_USER, os.getuid(), 19)
    changed.append("setpriority user")
except OSError:
    pass
print(json.dumps({"changed": changed}))
"""
    started = solo.workers_started
    assert _report(solo.run(program))["changed"] == []
    later = solo.run(
        "import os, json\nfds = [os.open('/dev/null', os.O_RDONLY) for _ in range(40)]\n"
        "print(json.dumps([os.getpriority(os.PRIO_PROCESS, 0), len(os.sched_getaffinity(0)), os.cpu_count()]))"
    )
    nice, cpus, count = json.loads(later.stdout)
    # Runs start at the niceness of what started the worker: 0, or this test's own (a niced
    # test run) on the local backends.
    assert later.ok and nice in {0, os.getpriority(os.PRIO_PROCESS, 0)} and nice != 19 and cpus == count, later
    _healthy(solo, started)


def test_earlier_runs_leave_nothing_in_memory(solo):
    # A job is a fork: its memory is a copy of whatever forked it. The worker had read the
    # previous run's output, input and source into its own heap, and a run found them there by
    # scanning its own memory (no /proc access to anyone else needed).
    secret_out, secret_src, secret_in = (secrets.token_hex(16) for _ in range(3))
    digests = {kind: hashlib.sha256(value.encode()).hexdigest() for kind, value in (("OUT", secret_out), ("SRC", secret_src), ("IN", secret_in))}
    first = solo.run(f"s = input()\nprint('RUN-A-OUT-{secret_out}' * 4)\n# RUN-A-SRC-{secret_src}\n", stdin=f"RUN-A-IN-{secret_in}\n")
    assert first.ok, first
    scan = r"""
import hashlib, json, re
DIGESTS = %r
found = set()
pattern = re.compile(rb"RUN-A-(OUT|SRC|IN)-([0-9a-f]{32})")
with open("/proc/self/maps") as fh:
    regions = [line.split() for line in fh]
memory = open("/proc/self/mem", "rb", 0)
for region in regions:
    if "r" not in region[1]:
        continue
    low, high = (int(x, 16) for x in region[0].split("-"))
    if high - low > (256 << 20):
        continue
    try:
        memory.seek(low)
        data = memory.read(high - low)
    except (OSError, OverflowError, ValueError):
        continue
    for match in pattern.finditer(data):
        kind, value = match.group(1).decode(), match.group(2)
        if hashlib.sha256(value).hexdigest() == DIGESTS[kind]:
            found.add(kind)
print(json.dumps({"found": sorted(found)}))
""" % (digests,)
    assert _report(solo.run(scan, limits=Limits(time_s=20)))["found"] == []


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------


def test_files_do_not_survive_into_the_next_run(solo):
    # Issue 11 (3): /sandbox outside the job directory, /dev/shm, /dev and / were writable and
    # never wiped: the next run saw all of them.
    marker = "left-" + uuid.uuid4().hex
    places = ["/sandbox", "/dev/shm", "/dev", "/", "/tmp", "/var/tmp", "/run", "..", "."]
    writer = f"""
import json, os
made = []
for place in {places!r}:
    path = os.path.join(place, {marker!r})
    try:
        with open(path, "w") as fh:
            fh.write("x")
        made.append(os.path.abspath(path))
    except OSError:
        pass
try:
    os.symlink("/tmp", os.path.join("..", {marker!r} + "-link"))
except OSError:
    pass
print(json.dumps({{"made": made}}))
"""
    started = solo.workers_started
    _report(solo.run(writer))
    reader = f"""
import json, os
seen = []
for place in {places!r}:
    for suffix in ("", "-link"):
        if os.path.lexists(os.path.join(place, {marker!r} + suffix)):
            seen.append(os.path.abspath(os.path.join(place, {marker!r} + suffix)))
print(json.dumps({{"seen": seen, "cwd_entries": sorted(os.listdir("."))}}))
"""
    report = _report(solo.run(reader))
    assert report["seen"] == [] and report["cwd_entries"] == ["main.py"], report
    _healthy(solo, started)


def test_planting_the_next_job_directory_does_not_break_the_next_run(solo):
    # Issue 11 (3): os.symlink('/tmp', '/sandbox/job-%d' % (n + 1)) made the next run "worker died".
    program = r"""
import os, re
here = os.getcwd()
parent = os.path.dirname(here)
match = re.search(r"(\d+)$", here)
names = ["job-%d" % i for i in range(1, 200)]
if match:
    names += [here[len(parent) + 1 : match.start()] + str(int(match.group(1)) + k) for k in range(1, 50)]
planted = 0
for name in names:
    try:
        os.symlink("/tmp", os.path.join(parent, name))
        planted += 1
    except OSError:
        pass
print(planted)
"""
    started = solo.workers_started
    assert solo.run(program).ok
    _healthy(solo, started)


def test_a_file_left_in_tmp_does_not_cost_the_worker(solo):
    # Issue 11 (3): removing a *file* from /tmp failed, so every such run replaced its worker.
    started = solo.workers_started
    # What /tmp holds before: the process backend's work area, and the scaffolding of read-only
    # binds when the interpreter or the checkout lives under /tmp (as in a CI checkout there).
    lister = "import os\nwork = os.path.dirname(os.getcwd())\nprint(sorted(e for e in os.listdir('/tmp') if os.path.join('/tmp', e) != work))"
    before = solo.run(lister)
    assert before.ok, before
    program = "import os\nopen('/tmp/left', 'w').write('x')\nos.makedirs('/tmp/d/e')\nopen('/tmp/d/e/f', 'w').write('x')\nos.chmod('/tmp/d', 0)\nos.symlink('/etc/passwd', '/tmp/l')"
    res = solo.run(program)
    assert res.ok, res
    listing = solo.run(lister)
    assert listing.stdout == before.stdout and not {"left", "d", "l"} & set(eval(listing.stdout)), listing
    _healthy(solo, started)


def test_tmpfs_bytes_count_against_the_run_and_are_freed(solo):
    # Issue 11 (4): 225 MiB written to an uncapped tmpfs at memory_mb=64 stayed in host memory.
    program = r"""
import os, sys
chunk = b"x" * (1 << 20)
written = 0
for place in ("/dev/shm", "/tmp", "."):
    try:
        with open(os.path.join(place, "fill"), "wb") as fh:
            for _ in range(80):
                fh.write(chunk)
                fh.flush()
                written += 1
                print(written, flush=True)
    except OSError:
        pass
"""
    res = solo.run(program, limits=Limits(memory_mb=64, time_s=20, file_size_mb=128))
    progress = [int(x) for x in res.stdout.split()]
    held = max(progress, default=0)
    assert res.oom or held <= 64, res
    assert held <= 64 + 40, f"the run held {held} MiB of files at memory_mb=64"
    after = solo.run(
        "import os\nused = 0\nfor p in ('/dev/shm', '/tmp', '.'):\n    s = os.statvfs(p)\n    used += (s.f_blocks - s.f_bfree) * s.f_frsize\n"
        "print(used >> 20)"
    )
    assert after.ok and int(after.stdout) < 4, after


# ---------------------------------------------------------------------------------------------
# the run's budget covers its whole process tree
# ---------------------------------------------------------------------------------------------


def test_memory_limit_covers_forked_children(solo):
    # Issue 11 (4): four forked children of 100 MiB held 449 MiB at memory_mb=128.
    program = r"""
import os, sys, time
children = []
for i in range(4):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        block = b"y" * (100 << 20)
        os.write(w, b"1")
        time.sleep(5)
        os._exit(0)
    os.close(w)
    children.append((pid, r))
for pid, r in children:
    os.read(r, 1)
print("ALL HELD", flush=True)
time.sleep(3)
"""
    res = solo.run(program, limits=Limits(memory_mb=128, time_s=15))
    assert res.oom and not res.ok and res.exit_code is None, res
    assert res.duration_s < 5, res
    assert "ALL HELD" not in res.stdout or res.duration_s < 3, res


# Issue 22: the accounting counted resident anonymous memory less shared pages, and tmpfs files.
# Memory that is neither escaped it: shared anonymous mappings held by several children (240 MiB
# at memory_mb=64, no oom), memfds written but never mapped (128 MiB at 64). Pages of such
# objects stay allocated while one page is still mapped, which no accounting sees: runs may not
# make them at all (the job filter), and /dev/zero, whose shared mappings are the same, reads as
# /dev/null. Shared memory through files (multiprocessing, /dev/shm) is counted.
_HELD_UNTIL_KILLED = r"""
import os, sys, time
def hold(make):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        keep = make()
        os.write(w, b"1")
        time.sleep(20)
        os._exit(0)
    os.close(w)
    return r
"""

MEMORY_ESCAPES = {
    "shared anonymous mappings in four children": _HELD_UNTIL_KILLED + r"""
import mmap
def shared():
    m = mmap.mmap(-1, 60 << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    for i in range(0, 60 << 20, 4096):
        m[i] = 1
    return m
pipes = [hold(shared) for _ in range(4)]
for r in pipes:
    if os.read(r, 1) != b"1":
        sys.exit("a child could not hold its share")
print("HELD", flush=True)
time.sleep(20)
""",
    "shared mappings of /dev/zero in four children": _HELD_UNTIL_KILLED + r"""
import mmap
def shared():
    fd = os.open("/dev/zero", os.O_RDWR)
    m = mmap.mmap(fd, 60 << 20)
    for i in range(0, 60 << 20, 4096):
        m[i] = 1
    return m
pipes = [hold(shared) for _ in range(4)]
for r in pipes:
    if os.read(r, 1) != b"1":
        sys.exit("a child could not hold its share")
print("HELD", flush=True)
time.sleep(20)
""",
    "memfds written, never mapped": r"""
import os, time
fds = []
chunk = b"m" * (1 << 20)
for i in range(8):
    fd = os.memfd_create("hoard%d" % i)
    for _ in range(16):
        os.write(fd, chunk)
    fds.append(fd)
print("HELD", flush=True)
time.sleep(20)
""",
    "shared anonymous memory unmapped but for one page": r"""
import ctypes, mmap, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
keep = []
for i in range(5):  # 250 MiB that no process maps any more, but one page of each
    m = mmap.mmap(-1, 50 << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    for j in range(0, 50 << 20, 4096):
        m[j] = 1
    address = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc.munmap(address + 4096, (50 << 20) - 4096)
    keep.append(m)
print("HELD", flush=True)
time.sleep(20)
""",
    "huge pages": r"""
import mmap, time
m = mmap.mmap(-1, 128 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000)
m[:1] = b"x"
print("HELD", flush=True)
time.sleep(20)
""",
}


@pytest.mark.parametrize("escape", sorted(MEMORY_ESCAPES))
def test_memory_the_accounting_cannot_see_is_denied_or_counted(solo, escape):
    res = solo.run(MEMORY_ESCAPES[escape], limits=Limits(memory_mb=64, time_s=30, file_size_mb=64))
    assert res.sandbox_error is None and not res.ok, res
    assert "HELD" not in res.stdout, res  # denied (PermissionError) or stopped before it held it
    assert res.oom or "PermissionError" in res.stderr or "No such device" in res.stderr, res
    assert res.duration_s < 15, res
    after = solo.run("print(6 * 7)")
    assert after.ok and after.stdout == "42\n", after


SHARED_FILE_MEMORY = r"""
import mmap, os, sys, time
from multiprocessing import shared_memory
size = int(sys.argv[1]) << 20 if len(sys.argv) > 1 else int(input()) << 20
block = shared_memory.SharedMemory(create=True, size=size)
block.buf[::4096] = b"s" * len(block.buf[::4096])
pid = os.fork()
if pid == 0:
    other = shared_memory.SharedMemory(name=block.name)
    assert other.buf[0] == ord("s")
    time.sleep(0.5)
    os._exit(0)
os.waitpid(pid, 0)
private = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
private[:2] = b"ok"
print("SHARED", private[:2].decode(), flush=True)
time.sleep(0.5)
block.close()
block.unlink()
"""


def test_shared_memory_through_files_works_and_counts(solo):
    small = solo.run(SHARED_FILE_MEMORY, stdin="20", limits=Limits(memory_mb=256, time_s=20, file_size_mb=256))
    assert small.ok and small.stdout == "SHARED ok\n", small
    big = solo.run(SHARED_FILE_MEMORY, stdin="50", limits=Limits(memory_mb=32, time_s=20, file_size_mb=256))
    # Bounded: by the budget (oom), the address-space cap (ENOMEM) or the tmpfs cap.
    assert not big.ok and big.sandbox_error is None and "SHARED" not in big.stdout, big


NON_DUMPABLE_HIDDEN_FILE = r"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(4, 0, 0, 0, 0) == 0 and libc.prctl(3, 0, 0, 0, 0) == 0  # now non-dumpable
fd = os.open("/dev/shm/hidden", os.O_CREAT | os.O_RDWR, 0o600)
os.unlink("/dev/shm/hidden")  # only the descriptor, which /proc/<pid>/fd no longer shows, holds it
chunk = b"h" * (1 << 20)
for _ in range(160):
    os.write(fd, chunk)
print("HELD", flush=True)
time.sleep(3)
"""


def test_a_non_dumpable_run_hides_no_memory_from_the_budget(solo):
    # The function-test harness makes its processes non-dumpable, so runs may; what a run holds
    # behind a descriptor the worker can no longer list (a deleted tmpfs file) still counts.
    res = solo.run(NON_DUMPABLE_HIDDEN_FILE, limits=Limits(memory_mb=64, time_s=20, file_size_mb=256))
    assert res.sandbox_error is None and not res.ok, res
    assert "HELD" not in res.stdout or res.oom, res
    after = solo.run("print(6 * 7)")
    assert after.ok and after.stdout == "42\n", after


GROW_KERNEL_BUFFERS = r"""
import fcntl, os, socket
r, w = os.pipe()
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
for name, grow in (
    ("pipe", lambda: fcntl.fcntl(w, 1031, 1 << 20)),  # F_SETPIPE_SZ
    ("sndbuf", lambda: a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)),
    ("rcvbuf", lambda: a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)),
    ("sndbufforce", lambda: a.setsockopt(socket.SOL_SOCKET, 32, 1 << 22)),
):
    try:
        grow()
        print(name, "grew")
    except PermissionError:
        print(name, "denied")
"""

SOCKET_QUEUES = r"""
import socket, time
keep = []
for _ in range(28):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.setblocking(False)
    try:
        while True:
            a.send(b"x" * 60000)
    except BlockingIOError:
        pass
    keep.append((a, b))
print("HELD", flush=True)
time.sleep(2)
"""


def test_kernel_buffers_cannot_grow_past_their_default(solo):
    # Issue 22 audit: 28 socket pairs with SO_SNDBUF/SO_RCVBUF at the host's wmem_max (4 MiB
    # here) queued 192 MiB of kernel memory at memory_mb=64, outside the budget.
    res = solo.run(GROW_KERNEL_BUFFERS)
    assert res.ok, res
    assert res.stdout.split() == ["pipe", "denied", "sndbuf", "denied", "rcvbuf", "denied", "sndbufforce", "denied"], res


def test_pipes_and_sockets_held_open_count_against_the_budget(solo):
    # 56 sockets at their default buffers (~416 KiB each here) are charged ~23 MiB: over 16.
    res = solo.run(SOCKET_QUEUES, limits=Limits(memory_mb=16, time_s=20))
    assert res.sandbox_error is None and not res.ok and res.oom, res
    fits = solo.run(SOCKET_QUEUES, limits=Limits(memory_mb=128, time_s=20))
    assert fits.ok and fits.stdout == "HELD\n", fits


def test_memory_within_budget_across_processes_is_allowed(solo):
    # The accounting must not punish honest use: two processes of 60 MiB at memory_mb=256.
    program = "import os, time\nif os.fork() == 0:\n    b = b'z' * (60 << 20)\n    time.sleep(0.3)\n    os._exit(0)\nb = b'z' * (60 << 20)\ntime.sleep(0.3)\nos.wait()\nprint('ok')"
    res = solo.run(program, limits=Limits(memory_mb=256, time_s=10))
    assert res.ok and res.stdout == "ok\n", res


# ---------------------------------------------------------------------------------------------
# IPC and sockets
# ---------------------------------------------------------------------------------------------


def test_sysv_ipc_and_message_queues_do_not_reach_the_next_run(solo):
    # Issue 11 (7): SysV shared memory a run left behind was seen by later runs of the worker.
    key = 0x5A000000 + secrets.randbelow(1 << 20)
    writer = rf"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
made = []
shmid = libc.shmget({key}, 4096, 0o1000 | 0o666)
if shmid >= 0:
    made.append("shm")
    libc.shmat.restype = ctypes.c_void_p
    address = libc.shmat(shmid, None, 0)
    if address not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(address, b"LEFT-FOR-LATER", 14)
if libc.msgget({key}, 0o1000 | 0o666) >= 0:
    made.append("msg")
if libc.semget({key}, 1, 0o1000 | 0o666) >= 0:
    made.append("sem")
try:
    mq_open = libc.mq_open
    if mq_open(b"/sandbox-{key}", 0o100 | 2, 0o666, None) >= 0:
        made.append("mq")
except AttributeError:
    pass
print(json.dumps({{"made": made}}))
"""
    _report(solo.run(writer))
    reader = rf"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
seen = []
if libc.shmget({key}, 0, 0) >= 0:
    seen.append("shm")
if libc.msgget({key}, 0) >= 0:
    seen.append("msg")
if libc.semget({key}, 0, 0) >= 0:
    seen.append("sem")
try:
    if libc.mq_open(b"/sandbox-{key}", 2) >= 0:
        seen.append("mq")
except AttributeError:
    pass
print(json.dumps({{"seen": seen, "ipcs": open("/proc/sysvipc/shm").read().count(chr(10)) - 1}}))
"""
    report = _report(solo.run(reader))
    assert report["seen"] == [] and report["ipcs"] == 0, report


def test_unix_sockets_do_not_reach_a_later_run_or_a_sibling(isolated):
    # A run leaves a listener (abstract and path sockets) in a daemon; another run, later or
    # at the same time in another worker, tries to talk to it.
    name = "sandbox-" + uuid.uuid4().hex
    listener = rf"""
import os, socket, time
servers = []
for address in ("\0{name}", "/tmp/{name}.sock", "/dev/shm/{name}.sock"):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(address)
        s.listen(4)
        servers.append(s)
    except OSError:
        pass
if os.fork() == 0:
    os.setsid()
    time.sleep(8)
    os._exit(0)
time.sleep(2.5)
print(len(servers))
"""
    caller = rf"""
import json, socket, time
connected = []
deadline = time.time() + 1.5
while time.time() < deadline:
    for address in ("\0{name}", "/tmp/{name}.sock", "/dev/shm/{name}.sock"):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(address)
            connected.append(address.replace(chr(0), "@"))
        except OSError:
            pass
        finally:
            s.close()
    time.sleep(0.05)
print(json.dumps({{"connected": sorted(set(connected))}}))
"""
    if isolated.max_concurrency >= 2:  # a sibling: another worker, at the same time
        concurrent = isolated.run_batch([Job(listener, limits=Limits(time_s=10)), Job("import time\ntime.sleep(0.5)\n" + caller)])
        assert concurrent[0].ok and int(concurrent[0].stdout) >= 1, concurrent[0]
        assert _report(concurrent[1])["connected"] == []
    assert isolated.run(listener, limits=Limits(time_s=10)).ok
    for _ in range(2 * isolated.max_concurrency):  # whichever worker serves it
        assert _report(isolated.run(caller))["connected"] == []


# ---------------------------------------------------------------------------------------------
# kernel interfaces a program has no business with
# ---------------------------------------------------------------------------------------------


def test_kernel_admin_syscalls_are_denied(solo):
    program = r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = {
    "mount tmpfs": lambda: libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None),
    "umount /tmp": lambda: libc.umount2(b"/tmp", 2),
    "umount /sandbox": lambda: libc.umount2(b"/sandbox", 2),
    "unshare user": lambda: libc.unshare(0x10000000),
    "unshare ipc": lambda: libc.unshare(0x08000000),
    "setns": lambda: libc.setns(0, 0),
    "keyctl": lambda: libc.syscall(250, 0, -3, 0, 0, 0),  # KEYCTL_GET_KEYRING_ID (session keyring)
    "add_key": lambda: libc.syscall(248, b"user", b"k", b"v", 1, -3),
    "userfaultfd": lambda: libc.syscall(323, 0),
    "io_uring_setup": lambda: libc.syscall(425, 1, ctypes.create_string_buffer(120)),
    "bpf": lambda: libc.syscall(321, 0, ctypes.create_string_buffer(64), 64),
    "perf_event_open": lambda: libc.syscall(298, ctypes.create_string_buffer(128), 0, -1, -1, 0),
    "clone(CLONE_PARENT)": lambda: libc.syscall(56, 0x00008000 | 17, 0, 0, 0, 0),
    "raise RLIMIT_NPROC": lambda: libc.setrlimit(6, ctypes.byref((ctypes.c_ulong * 2)(1 << 20, 1 << 20))),
    "raise RLIMIT_AS": lambda: libc.setrlimit(9, ctypes.byref((ctypes.c_ulong * 2)(1 << 45, 1 << 45))),
}
succeeded = []
for name, call in calls.items():
    result = call()
    if result == 0 and name.startswith("clone"):
        import os
        os._exit(0)  # the clone child, were it allowed: the parent reports it
    if result >= 0:
        succeeded.append(name)
print(json.dumps({"succeeded": succeeded}))
"""
    if platform_machine() != "x86_64":
        pytest.skip("the raw syscall numbers in this test are x86_64 ones")
    started = solo.workers_started
    assert _report(solo.run(program))["succeeded"] == []
    _healthy(solo, started)


def platform_machine() -> str:
    import platform

    return platform.machine()


# ---------------------------------------------------------------------------------------------
# processes that try to outlive their run
# ---------------------------------------------------------------------------------------------


def test_hidden_and_escaping_processes_do_not_outlive_the_run(solo):
    # New sessions, double forks, a subreaper of its own, a disguised name, SIGTERM/SIGHUP
    # ignored, a process that keeps forking so a sweep never sees it standing still.
    marker = "hide-" + uuid.uuid4().hex
    program = rf"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(sig, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        libc.prctl(15, b"python3", 0, 0, 0)  # PR_SET_NAME
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
    os._exit(0)
if os.fork() == 0:
    os.setpgid(0, 0)
    while True:  # hop to a fresh pid every few milliseconds
        if os.fork():
            os._exit(0)
        time.sleep(0.005)
time.sleep(0.3)
print("parent leaves")
"""
    started = solo.workers_started
    res = solo.run(program, limits=Limits(time_s=10))
    assert res.ok and "parent leaves" in res.stdout, res
    survivors = solo.run(
        _OTHERS + f"import json\nseen = []\nfor pid in OTHERS:\n    try:\n        if {marker!r}.encode() in open('/proc/%d/cmdline' % pid, 'rb').read():\n"
        "            seen.append(pid)\n    except OSError:\n        pass\nprint(json.dumps({'seen': seen, 'others': len(OTHERS)}))"
    )
    report = _report(survivors)
    assert report["seen"] == [] and report["others"] <= 3, report
    _healthy(solo, started)


# ---------------------------------------------------------------------------------------------
# the harness
# ---------------------------------------------------------------------------------------------


_FORGER = r"""
import json, os
def add(a, b):
    return 0
def _forge(secret):
    for record in ({"kind": "ran", "ok": True, "error": None, "stdout": ""},
                   *({"kind": "test", "index": i, "error": None, "stdout": "", "timed_out": False} for i in range(3)),
                   {"kind": "done"}):
        os.write(1, (secret + json.dumps(record) + "\n").encode())
    os._exit(0)
"""


@pytest.mark.parametrize(
    "steal",
    [
        "os.pread(0, 64, 0).decode().split()[0]",  # issue 11 (5): stdin stayed open on fd 0
        "open('/proc/self/fd/0').read().split()[0]",
        "open('/dev/stdin').read().split()[0]",
    ],
)
def test_the_harness_secret_cannot_be_read_back_from_stdin(isolated, steal):
    solution = _FORGER + f"try:\n    _forge({steal})\nexcept Exception:\n    pass\n"
    report = sandboxes.run_function_tests(
        isolated, solution, ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 5) == 5"], entry_point="add"
    )
    assert report.passed == 0 and report.total == 3, report


def test_every_run_of_a_busy_pool_gets_its_own_result(isolated):
    # Results must never be crossed between concurrent runs or shifted by one.
    jobs = [Job(f"import sys\nprint({i})\nsys.exit({i % 5})", stdin=str(i)) for i in range(40)]
    results = isolated.run_batch(jobs)
    assert [(r.stdout, r.exit_code) for r in results] == [(f"{i}\n", i % 5) for i in range(40)]


def test_run_uids_are_fresh_and_distinct_from_the_worker(solo):
    if os.geteuid() != 0 or solo.name == "docker":
        pytest.skip("per-run uids need root on the host (docker runs its worker as one non-root user)")
    res = [solo.run("import os\nprint(os.getuid(), os.stat('/proc/1').st_uid, os.stat('/proc/%d' % os.getppid()).st_uid)") for _ in range(3)]
    uids = [tuple(map(int, r.stdout.split())) for r in res]
    assert len({u for u, _, _ in uids}) == 3, uids  # a new uid each run
    assert all(u != worker and u != zygote for u, worker, zygote in uids), uids


# ---------------------------------------------------------------------------------------------
# a run may not turn its own failure into the sandbox's (issue 22): a sandbox failure is
# retried and never scored, so a program that could cause one on demand would trade its 0 for
# "not scored". What a run leaves for the clean-up must cost it, never the sandbox.
# ---------------------------------------------------------------------------------------------

CLEANUP_FLOODS = {
    # Hundreds of thousands of files for the wipe (each costs the run ~1 KiB of its budget).
    "many files": r"""
import os
os.makedirs("/tmp/flood", exist_ok=True)
n = 0
try:
    while True:
        for i in range(1000):
            open("/tmp/flood/%d" % n, "w").close()
            n += 1
except OSError:
    pass
print(n)
""",
    # A tree deeper than PATH_MAX (every path of it too long for one system call), made with
    # relative paths, plus one made unreadable half-way down.
    "a tree deeper than PATH_MAX": r"""
import os
os.chdir("/tmp")
depth = 0
try:
    for depth in range(3000):
        os.mkdir("d" * 200)
        os.chdir("d" * 200)
        if depth == 1500:
            open("f", "w").close()
except OSError:
    pass
os.chmod(".", 0)
print(depth)
""",
    # Processes that stop themselves, ignore everything they can and keep the pipes open.
    "stopped children holding the pipes": r"""
import os, signal, time
for _ in range(8):
    if os.fork() == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(60)
        os._exit(0)
print("left")
""",
}


@pytest.mark.parametrize("flood", sorted(CLEANUP_FLOODS))
def test_what_a_run_leaves_never_becomes_a_sandbox_failure(solo, flood):
    res = solo.run(CLEANUP_FLOODS[flood], limits=Limits(time_s=5, memory_mb=512))
    assert res.sandbox_error is None, res
    after = solo.run("import os\nprint(6 * 7, sorted(os.listdir('/tmp')) == sorted(set(os.listdir('/tmp')) - {'flood', 'd' * 200}))")
    assert after.sandbox_error is None and after.ok and after.stdout == "42 True\n", after
    assert solo.run("print('next')").stdout == "next\n"
