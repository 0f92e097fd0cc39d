"""The per-run path of the warm worker after issue 35's trimming still isolates each run.

Issue 35 (2) cut what a trivial run costs: the zygote builds the program's stdin, stdout and
stderr once (a job inherits them empty), the zygote's request and reports are binary records,
the job reads ``main.py`` without a file object, and one sweep of the work area removes the job
directory. Each test here is a behaviour those changes could have broken: what a run leaves or
buffers never reaches the next run, the streams behave as a fresh interpreter's, the source
reads as ``python main.py`` reads it, the limits still arrive, and the job's seccomp filter (the
zygote loads it after building the streams) still binds every run. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import pytest

from sandboxes import Limits
from sandboxes.core import Sandbox
from tests.sandboxes.conftest import ISOLATED_BACKENDS, make

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", params=ISOLATED_BACKENDS)
def solo(request) -> Iterator[Sandbox]:
    """One warm worker per backend, so consecutive runs share it (and its zygote)."""
    sandbox = make(request.param, pool_size=1)
    assert sandbox.run("pass").ok
    yield sandbox
    sandbox.close()


def test_the_previous_job_directory_is_gone_with_everything_in_it(solo):
    marker = uuid.uuid4().hex
    writer = f"""
import os
os.makedirs("deep/er")
open("deep/er/{marker}", "w").write("x")
os.chmod("deep", 0)  # the sweep must still get through
open("{marker}", "w").write("x")
print(os.getcwd())
"""
    first = solo.run(writer)
    assert first.ok, first
    previous = first.stdout.strip()
    checker = f"""
import json, os
print(json.dumps({{"previous": os.path.lexists({previous!r}), "here": os.getcwd(), "entries": sorted(os.listdir("."))}}))
"""
    second = solo.run(checker)
    assert second.ok, second
    report = json.loads(second.stdout)
    assert report["previous"] is False and report["here"] != previous, report
    assert report["entries"] == ["main.py"], report


def test_output_a_run_buffered_but_never_flushed_does_not_reach_the_next_run(solo):
    # The streams are built once in the zygote: every job must get them empty.
    secret = uuid.uuid4().hex
    leaker = f"import os, sys\nsys.stdout.write({secret!r})\nsys.stderr.write('err-' + {secret!r})\nos._exit(0)"
    leaked = solo.run(leaker)
    assert leaked.exit_code == 0 and secret not in leaked.stdout, leaked  # os._exit does not flush
    clean = solo.run("print('next')")
    assert clean.stdout == "next\n" and secret not in clean.stderr, clean


def test_streams_behave_as_a_fresh_interpreters(solo):
    program = r"""
import json, sys
print(json.dumps({
    "stdin": [sys.stdin.seekable(), sys.stdin.encoding, sys.stdin.errors, sys.stdin.read()],
    "stdout": [sys.stdout.seekable(), sys.stdout.encoding, sys.stdout.errors, sys.stdout.line_buffering],
    "stderr": [sys.stderr.seekable(), sys.stderr.errors, sys.stderr.line_buffering],
    "dunder": [sys.stdin is sys.__stdin__, sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__],
    "fds": [sys.stdin.fileno(), sys.stdout.fileno(), sys.stderr.fileno()],
}))
"""
    for text in ("first input\nline two\n", "second, different\n"):
        res = solo.run(program, stdin=text)
        assert res.ok, res
        report = json.loads(res.stdout)
        # stdin is an in-memory file (seekable), stdout and stderr are pipes (not seekable).
        assert report["stdin"] == [True, "utf-8", "strict", text], report
        assert report["stdout"] == [False, "utf-8", "strict", False], report
        assert report["stderr"] == [False, "backslashreplace", True], report
        assert report["dunder"] == [True, True, True] and report["fds"] == [0, 1, 2], report


ENDINGS = {  # how a program's output ends up written at exit
    "file never flushed": "out = open(1, 'w', closefd=False)\nout.write('kept')\n",
    "print in a finalizer": (
        "class Last:\n    def __del__(self):\n        print('finalized')\nlast = Last()\nprint('first')\n"
    ),
    "through __stdout__": "import sys\nsys.__stdout__.write('dunder')\n",
    "atexit then exit code": "import atexit, sys\natexit.register(lambda: print('bye'))\nsys.exit(3)\n",
    "stdout closed": "import sys\nprint('x')\nsys.stdout.close()\n",
    "stdout detached": "import sys\nbuffer = sys.stdout.detach()\nbuffer.write(b'x')\n",
    "stderr closed": "import sys\nsys.stdout.write('x')\nsys.stderr.close()\n",
    "stdout set to None": "import sys\nprint('x')\nsys.stdout = None\n",
    "stdout unwritable": "import sys\nprint('x')\nsys.stdout = open('/dev/full', 'w')\nprint('y')\n",
}


@pytest.mark.parametrize("ending", ENDINGS)
def test_output_at_exit_is_what_python_main_py_writes(solo, ending, tmp_path):
    # A fresh interpreter finalizes the program's globals at exit (after the exit handlers and a
    # flush): what a file object it never flushed, or a finalizer, writes then is output too.
    import subprocess
    import sys

    program = ENDINGS[ending]
    (tmp_path / "main.py").write_text(program)
    real = subprocess.run([sys.executable, "-I", "main.py"], cwd=tmp_path, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    res = solo.run(program)
    assert (res.stdout, res.exit_code) == (real.stdout, real.returncode), (res, real)


def test_source_reads_as_python_main_py_reads_it(solo):
    # Universal newlines (CRLF and lone CR are line ends, also inside a string literal) and
    # UTF-8, as the file object it used to be read with gave them.
    source = 'x = """a\rb"""\r\nprint(repr(x))\r\nprint("é ✓")\rprint(__name__, __file__.endswith("/main.py"))\n'
    res = solo.run(source)
    assert res.ok, res
    assert res.stdout == "'a\\nb'\né ✓\n__main__ True\n", res


def test_limits_still_reach_the_job(solo):
    program = """
import resource
names = ("RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CORE")
print([resource.getrlimit(getattr(resource, n)) for n in names])
"""
    res = solo.run(program, limits=Limits(time_s=2.5, open_files=40, file_size_mb=3))
    assert res.ok, res
    assert res.stdout == f"{[(4, 4), (40, 40), (3 << 20, 3 << 20), (0, 0)]}\n", res


def test_the_job_filter_still_binds_every_run(solo):
    # The zygote builds the streams (with a memfd) before it loads the job filter: the filter
    # must still be on every job, denying what it denied.
    program = """
import json, os, signal
out = {}
try:
    os.memfd_create("x")
    out["memfd"] = "allowed"
except PermissionError:
    out["memfd"] = "denied"
try:
    os.kill(os.getppid(), 0)  # the zygote
    out["kill_zygote"] = "allowed"
except PermissionError:
    out["kill_zygote"] = "denied"
with open("/proc/self/status") as fh:
    out["filters"] = [line.split()[1] for line in fh if line.startswith("Seccomp_filters:")]
print(json.dumps(out))
"""
    for _ in range(2):  # and on the next run of the same zygote
        res = solo.run(program)
        assert res.ok, res
        report = json.loads(res.stdout)
        assert report["memfd"] == "denied" and report["kill_zygote"] == "denied", report
        # Our two filters at least (a container runtime adds its own); kernels before 5.9 list none.
        assert report["filters"] == [] or int(report["filters"][0]) >= 2, report


@pytest.mark.parametrize("backend", ISOLATED_BACKENDS)
def test_threads_signals_and_forks_behave_as_in_a_fresh_interpreter(backend):
    # The zygote forks a job with libc's fork, without CPython's work around a fork (its at-fork
    # hooks, the re-initialisation of the runtime's locks and thread states): in a zygote with
    # one thread that holds no lock, nothing of that is needed, and a job must see no difference.
    program = r"""
import os, random, signal, sys, threading, time
report = {
    "main": threading.current_thread() is threading.main_thread(),
    "threads": threading.active_count(),
    "ident": threading.get_ident() == threading.main_thread().ident,
}
def late():
    time.sleep(0.8)
    print("thread ran to its end", flush=True)
threading.Thread(target=late).start()  # not a daemon: the exit waits for it
fired = []
signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
signal.setitimer(signal.ITIMER_REAL, 0.05)
time.sleep(0.3)
report["alarm"] = fired == [1]
try:
    signal.raise_signal(signal.SIGINT)
    time.sleep(0.1)
    report["sigint"] = "none"
except KeyboardInterrupt:
    report["sigint"] = "KeyboardInterrupt"
read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write_end, str(random.getrandbits(64)).encode())
    os._exit(0)
os.close(write_end)
child = os.read(read_end, 100).decode()
os.waitpid(pid, 0)
report["forked"] = child.isdigit() and child != str(random.getrandbits(64))
print(sorted(report.items()), random.getrandbits(64), flush=True)
"""
    # `random` and `threading` preloaded, so that the zygote's own state is what a job inherits.
    solo = make(backend, pool_size=1, preload=("random", "threading"))
    try:
        first = solo.run(program, limits=Limits(time_s=10))
        second = solo.run(program, limits=Limits(time_s=10))
    finally:
        solo.close()
    expected = "[('alarm', True), ('forked', True), ('ident', True), ('main', True), ('sigint', 'KeyboardInterrupt'), ('threads', 1)]"
    draws = []
    for res in (first, second):
        assert res.ok, res
        # (in either order: on a loaded machine the thread may finish before the report)
        report = [line for line in res.stdout.splitlines() if line.startswith("[(")]
        assert len(report) == 1 and report[0].rpartition(" ")[0] == expected, res.stdout
        assert res.stdout.count("thread ran to its end\n") == 1, res.stdout
        draws.append(report[0].rpartition(" ")[2])
    # each run seeds its own random state, as a fresh interpreter does
    assert draws[0] != draws[1], (first, second)


def test_the_zygote_forks_with_os_fork_once_it_has_a_second_thread():
    # libc's bare fork is only for a process with one thread: with another thread alive (which
    # could hold a lock CPython's after-fork work would repair), the zygote falls back to os.fork.
    import subprocess
    import sys

    code = r"""
import os, threading, time
import sandboxes._worker_main as worker
alone = worker._job_fork()
pid = alone()
if pid == 0:
    os._exit(7)
status = os.waitpid(pid, 0)[1]
stop = threading.Event()
threading.Thread(target=stop.wait).start()
with_thread = worker._job_fork()
stop.set()
print(alone is not os.fork, os.waitstatus_to_exitcode(status), with_thread is os.fork)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["True", "7", "True"], out


def _huge_pages_can_be_collapsed() -> str | None:
    """Why ``MADV_COLLAPSE`` cannot work on this machine, or None where it can. (It ignores the
    machine's setting, ``never`` included: the sandbox honours that one itself.)"""
    import platform

    try:
        open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return "this kernel has no transparent huge pages"
    major, minor = (int(part) for part in platform.release().split(".")[:2])
    if (major, minor) < (6, 1):
        return f"MADV_COLLAPSE needs Linux 6.1+, this is {platform.release()}"
    return None


def test_the_zygote_collapses_its_heap_into_huge_pages_where_the_kernel_can():
    # The function the zygote calls before its first fork, in a process of its own whose heap
    # holds ~12 MiB (bytes objects over 512 bytes live in malloc's heap, not in pymalloc's
    # arenas). Where the kernel has no MADV_COLLAPSE it must change nothing and not fail.
    import subprocess
    import sys

    code = r"""
import json
import sandboxes._worker_main as worker
blocks = [bytes(1000) + b"%d" % i for i in range(12000)]
def huge_bytes():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1]) << 10
before = huge_bytes()
collapsed = worker._collapse_to_huge_pages()
print(json.dumps({"before": before, "collapsed": collapsed, "after": huge_bytes(),
                  "intact": all(b[:1000] == bytes(1000) and b[1000:] == b"%d" % i for i, b in enumerate(blocks))}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(out.stdout)
    assert report["intact"], report  # the data lives on, wherever the kernel moved it
    why_not = _huge_pages_can_be_collapsed()
    if why_not is not None:
        assert report["collapsed"] == 0, report
        pytest.skip(why_not)
    assert report["collapsed"] >= 4 << 20, report  # ~12 MiB of heap holds at least two stretches
    assert report["after"] >= report["before"] + (4 << 20), report


def _zygote_pid(sandbox: Sandbox) -> int:
    """The zygote's pid, read from the host's ``/proc``: the process at the end of the worker's
    line of single children between runs (bwrap, worker, zygote)."""
    import os

    (top,) = sandbox.worker_pids()
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = open(f"/proc/{name}/stat", "rb").read()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rfind(b")") + 2 :].split()[1]), []).append(int(name))
    pid = top
    while len(children.get(pid, ())) == 1:
        pid = children[pid][0]
    assert pid != top, "the worker has no zygote"
    return pid


def _zygote_huge_kib(sandbox: Sandbox) -> int:
    """The zygote's memory in huge pages (kB), read from the host's ``/proc``."""
    pid = _zygote_pid(sandbox)
    try:
        rollup = open(f"/proc/{pid}/smaps_rollup").read()
    except PermissionError:
        pytest.skip("reading another user's /proc/<pid>/smaps_rollup needs root")
    return next(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("AnonHugePages:"))


@pytest.mark.parametrize("backend", ["bwrap", "process"])
@pytest.mark.parametrize("setting", [None, "off"])
def test_sandbox_huge_pages_off_keeps_the_zygote_in_small_pages(backend, setting, monkeypatch):
    # The zygote's huge pages are the machine's and the user's to refuse: SANDBOX_HUGE_PAGES=off
    # (and a machine set to `never`, below) leaves it in 4 KiB pages. (Local backends: a
    # container's processes have no host pid to read.)
    if setting is None:
        monkeypatch.delenv("SANDBOX_HUGE_PAGES", raising=False)
    else:
        monkeypatch.setenv("SANDBOX_HUGE_PAGES", setting)
    # numpy preloaded: a zygote of ~30 MiB, whose heap holds several aligned 2 MiB stretches
    # wherever address randomisation puts it (the light zygote's ~6 MiB heap holds one or two,
    # and a run may split one back into small pages).
    sandbox = make(backend, pool_size=1, preload=("numpy",))
    try:
        assert sandbox.run("print(sum(range(10)))").stdout == "45\n"
        huge = _zygote_huge_kib(sandbox)
    finally:
        sandbox.close()
    if setting == "off":
        assert huge == 0
        return
    why_not = _huge_pages_can_be_collapsed()
    if why_not is None and "[never]" in open("/sys/kernel/mm/transparent_hugepage/enabled").read():
        why_not = "transparent huge pages are set to never on this machine"
    if why_not is not None:
        assert huge == 0
        pytest.skip(why_not)
    assert huge >= 2048


def test_the_machines_never_and_the_users_off_are_honoured(tmp_path, monkeypatch):
    from sandboxes import _worker_main as worker
    from sandboxes import pool

    setting = tmp_path / "enabled"
    monkeypatch.setattr(pool, "_THP_SETTING", setting)
    monkeypatch.setattr(worker, "_THP_SETTING", str(setting))
    monkeypatch.delenv("SANDBOX_HUGE_PAGES", raising=False)
    # No setting to read (no THP in this kernel, or /sys not mounted inside the sandbox): the
    # host's word stands, and MADV_COLLAPSE itself reports what it cannot do.
    assert pool.huge_pages_allowed() is True
    assert worker._huge_pages_wanted(True) is True
    assert worker._huge_pages_wanted(None) is True  # a config written without the host's helper
    assert worker._huge_pages_wanted(False) is False
    for mode, allowed in (("always [madvise] never\n", True), ("[always] madvise never\n", True), ("always madvise [never]\n", False)):
        setting.write_text(mode)
        assert pool.huge_pages_allowed() is allowed, mode
        assert worker._huge_pages_wanted(True) is allowed, mode  # read inside a container
        assert worker._huge_pages_wanted(False) is False, mode
    setting.write_text("always [madvise] never\n")
    for off in ("off", "0", "false", "NO", " off "):
        monkeypatch.setenv("SANDBOX_HUGE_PAGES", off)
        assert pool.huge_pages_allowed() is False, off
    monkeypatch.setenv("SANDBOX_HUGE_PAGES", "on")
    assert pool.huge_pages_allowed() is True
    assert pool.with_host_settings({})["huge_pages"] is True
    assert pool.with_host_settings({"huge_pages": False})["huge_pages"] is False  # a backend's own word


def test_what_a_run_writes_into_memory_it_inherited_never_reaches_the_next_run(solo):
    # The zygote's heap is mapped in huge pages (shared with each job until it writes): a job's
    # writes to inherited objects, large and small, stay its own.
    program = """
import json, sys
table = sys.modules  # a large dict, in the inherited heap
seen = {"marked": "_run_path_marker" in table, "json_dumps": json.dumps.__name__}
table["_run_path_marker"] = object()
json.dumps = None
for name in list(table):
    table[name] = table[name]  # rewrite every entry
print(seen)
"""
    for _ in range(3):
        res = solo.run(program)
        assert res.ok, res
        assert res.stdout == "{'marked': False, 'json_dumps': 'dumps'}\n", res


def test_each_run_starts_from_its_own_main_paths_and_environment(solo):
    # The zygote sets a job's HOME, TMPDIR, sys.argv, sys.path[0] and __main__.__file__ before
    # it forks it, and one __main__ serves every job: each run must find its own, and nothing a
    # previous run did to them.
    program = """
import atexit, json, os, subprocess, sys
here = os.getcwd()
child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('HOME'), os.environ.get('LD_BIND_NOW'))"],
                       capture_output=True, text=True).stdout.split()
print(json.dumps({
    "own": [__file__, sys.argv, sys.path[0], os.environ["HOME"], os.environ["TMPDIR"], child[0]]
    == [here + "/main.py", [here + "/main.py"], here, here, here, here],
    "main": sys.modules["__main__"].__dict__ is globals(),
    "names": sorted(globals()),
    "left": [p for p in sys.path if p.startswith("/left")],
    "bind_now": [os.environ.get("LD_BIND_NOW"), child[1]],
}))
left_behind = 1
sys.modules["__main__"].also_left = 2
sys.argv.append("left")
sys.path.insert(0, "/left")
os.environ["HOME"] = os.environ["TMPDIR"] = "/left"
atexit.register(print, "an exit handler of the previous run")
"""
    reports = []
    for _ in range(3):
        res = solo.run(program)
        assert res.ok, res
        line, *rest = res.stdout.splitlines()
        assert rest == ["an exit handler of the previous run"], res  # its own, once
        reports.append(json.loads(line))
    for report in reports:
        assert report["own"] and report["main"] and report["left"] == [], report
        assert report["bind_now"] == [None, "None"], report  # the worker's, never a program's
        assert "left_behind" not in report["names"] and "also_left" not in report["names"], report
    assert reports[0]["names"] == reports[1]["names"] == reports[2]["names"]


def test_a_subprocess_and_every_view_of_the_environment_see_the_runs_own_home(solo):
    # The zygote writes each job's HOME and TMPDIR into buffers C's environment points at, and
    # into os.environ's mapping: every way a program reads them must agree, in the run and in a
    # subprocess, whatever the previous run did to them.
    program = """
import os, subprocess, sys
here = os.getcwd().encode()
child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['HOME'], os.environ['TMPDIR'])"],
                       capture_output=True).stdout.split()
shell = subprocess.run(["/bin/sh", "-c", 'echo "$HOME" "$TMPDIR"'], capture_output=True).stdout.split()
views = [os.environb[b"HOME"], os.environb[b"TMPDIR"], os.getenvb(b"HOME"), os.fsencode(os.getenv("TMPDIR"))]
print(views == [here] * 4 and child == [here] * 2 and shell == [here] * 2, views, child, shell)
del os.environ["HOME"]
os.environ["TMPDIR"] = "/x" * 3000  # longer than a value the zygote writes in place
os.unsetenv("TMPDIR")
"""
    for _ in range(3):
        res = solo.run(program)
        assert res.ok, res
        assert res.stdout.startswith("True "), res


def test_the_job_environment_agrees_with_c_and_falls_back_to_setenv_for_good():
    # In a process of its own: it changes the environment of the process it runs in.
    program = """
import ctypes, os, subprocess, sys
import sandboxes._worker_main as worker
getenv = ctypes.CDLL(None).getenv
getenv.restype = ctypes.c_char_p
environment = worker._JobEnvironment()
seen = []
for value in [b"/one", b"/two/" + b"x" * 100, b"/x" * 2049, b"/three"]:
    environment.set(value)
    shell = subprocess.run(["/bin/sh", "-c", 'printf %s "$HOME"'], capture_output=True).stdout
    seen.append([getenv(b"HOME") == getenv(b"TMPDIR") == os.environb[b"HOME"] == os.environb[b"TMPDIR"] == shell,
                 environment.in_place, shell[:20]])
print(seen)
"""
    import ast
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    seen = ast.literal_eval(result.stdout)  # lists of bools and bytes
    assert [row[0] for row in seen] == [True] * 4, seen
    assert [row[1] for row in seen] == [True, True, False, False], seen  # in place until a fallback
    assert [row[2] for row in seen] == [b"/one", b"/two/xxxxxxxxxxxxxxx", b"/x/x/x/x/x/x/x/x/x/x", b"/three"], seen


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_the_zygote_does_not_grow_with_the_jobs_it_forks(backend):
    # C's setenv keeps every value it is ever given: when the zygote set each job's HOME and
    # TMPDIR with it, its heap grew by ~160 bytes a job (~130 KiB per 1,000 runs) for as long
    # as a worker lived.
    sandbox = make(backend, pool_size=1, max_jobs_per_worker=5000)
    try:
        for _ in range(50):
            assert sandbox.run("pass\n").ok
        pid = _zygote_pid(sandbox)

        def data_kib() -> int:
            status = open(f"/proc/{pid}/status").read()
            return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmData:"))

        before = data_kib()
        for _ in range(1200):
            assert sandbox.run("pass\n").ok
        assert _zygote_pid(sandbox) == pid  # the same zygote throughout
        assert data_kib() - before < 64, (before, data_kib())
    finally:
        sandbox.close()


@pytest.mark.parametrize(
    "ending",
    [
        pytest.param("import sys\nsys.stdout.write('x' * 200_000)\n", id="output past the cap"),
        pytest.param("import os, time\nif os.fork() == 0:\n    time.sleep(60)\nos._exit(4)\n", id="a child left behind"),
        pytest.param("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", id="killed by a signal"),
    ],
)
def test_the_zygotes_report_on_one_run_is_never_read_as_the_nexts(solo, ending):
    # The zygote reports a job once it has reaped it; a run the worker ends itself (output past
    # the cap) or that ends oddly must not leave a report behind for the next run to read.
    first = solo.run(ending, limits=Limits(output_bytes=100_000))
    assert not first.ok, first
    for code in (3, 0, 5):
        res = solo.run(f"import sys\nprint('run', {code})\nsys.exit({code})\n")
        assert (res.exit_code, res.stdout) == (code, f"run {code}\n"), res


@pytest.mark.parametrize("backend", ["bwrap", "process"])  # (a container's processes are not ours to read)
def test_the_worker_interpreter_binds_its_symbols_at_start(backend):
    # LD_BIND_NOW reaches the worker's interpreter (so no forked job binds a symbol lazily,
    # which would copy a page of the library's address table), and the worker removes it from
    # the environment before any job (the test before this one).
    from sandboxes.local import WORKER_SOURCE

    sandbox = make(backend, pool_size=1)
    try:
        assert sandbox.run("pass").ok
        found = []
        frontier = list(sandbox.worker_pids())
        while frontier:
            pid = frontier.pop()
            try:
                environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
                command = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                children = open(f"/proc/{pid}/task/{pid}/children").read().split()
            except OSError:
                continue
            # The worker and its zygote (bwrap's command line ends with the worker's too).
            if command[-2:] == [WORKER_SOURCE.encode(), b""] and os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python"):
                found.append(b"LD_BIND_NOW=1" in environ)
            frontier += [int(child) for child in children]
        assert found and all(found), found
    finally:
        sandbox.close()
