"""Trusted stdin/stdout programs graded in one run (`run_io_programs`).

What the Coder–Tester's catch reward on stdin/stdout problems relies on: each program's report on
each case is what `run_io_cases` (one sandbox run per case) gives; the cases run one after another
in one process, and nothing one case leaves (files, modules, builtins, limits, threads) reaches a
later case or program; a program stops at its first
wrong answer on a case the golden passed, and only there; a case's process killed by anything
but the run is not established, never a verdict. Real sandboxes (bwrap, process, docker).
"""

from __future__ import annotations

import pytest

from sandboxes.harness import run_io_cases, run_io_programs

GOLDEN = "a, b = map(int, input().split())\nprint(a + b)\n"
CASES = [("1 2\n", "3\n"), ("5 5\n", "10\n"), ("0 0\n", "0\n")]

# The end of a program that passes a case only where it saw nothing an earlier case left.
_ANSWER = "print(-1 if seen else sum(map(int, input().split())))\n"

# Programs of every ending a run of its own distinguishes, each reading its input its own way.
PROGRAMS = {
    "golden": GOLDEN,
    "wrong": "a, b = map(int, input().split())\nprint(a - b)\n",
    "wrong on one": "a, b = map(int, input().split())\nprint(a + b if a != 5 else 0)\n",
    "open(0)": "print(sum(map(int, open(0).read().split())))\n",
    "fstat size": "import os\ndata = os.read(0, os.fstat(0).st_size)\nprint(sum(map(int, data.split())))\n",
    "buffer, no newline": "import sys\nsys.stdout.write(str(sum(int(x) for x in sys.stdin.buffer.read().split())))\n",
    "loops": "while True:\n    pass\n",
    "raises": "raise ValueError('boom')\n",
    "exit 3": "import sys\nsys.exit(3)\n",
    "exit message": "import sys\nsys.exit('no input')\n",
    "exit 0 after print": "import sys\nprint(sum(map(int, input().split())))\nsys.exit(0)\n",
    "floods stdout": "print('x' * 2000000)\n",
    "thread": (
        "import threading\nout = []\n"
        "t = threading.Thread(target=lambda: out.append(sum(map(int, input().split()))))\n"
        "t.start()\nt.join()\nprint(out[0])\n"
    ),
    "compile error": "return 5\n",
    "syntax error": "def f(:\n",
    "atexit": "import atexit\na, b = map(int, input().split())\natexit.register(lambda: print(a + b))\n",
    "unicode": "input()\nprint('é ü 中')\n",
    # Output written at exit: by a file never flushed (when the globals are finalized), through
    # sys.__stdout__, by the original stdout after the program replaced it.
    "file never flushed": "out = open(1, 'w', closefd=False)\nout.write(str(sum(map(int, input().split()))))\n",
    "__stdout__": "import sys\nsys.__stdout__.write(str(sum(map(int, input().split()))))\n",
    "stdout replaced": "import sys\nprint(sum(map(int, input().split())))\nsys.stdout = None\n",
    "recursion": "import sys\nsys.setrecursionlimit(100)\ndef f(n):\n    return f(n + 1)\nf(0)\n",
    # A program's cases run one after another in its process: what one case changes must not
    # reach the next (each of these passes a case only where nothing an earlier one did is seen).
    "os._exit": "import os, sys\nprint(sum(map(int, input().split())))\nsys.stdout.flush()\nos._exit(0)\n",
    "os._exit unflushed": "import os\nprint(sum(map(int, input().split())))\nos._exit(4)\n",
    "rebinds builtins": (  # (a call: its cases share a process, which puts the builtins back)
        "import builtins\nseen = hasattr(builtins, 'left_over') or builtins.input.__name__ != 'input'\n"
        "line = input()\nbuiltins.__dict__.update(left_over=1, input=lambda: '0 0')\n"
        "print(-1 if seen else sum(map(int, line.split())))\n"
    ),
    "recursion limit": (
        "import sys\nseen = sys.getrecursionlimit() == 123\nsys.setrecursionlimit(123)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "daemon thread": (
        "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.05), print(99)), daemon=True).start()\n"
        "print(sum(map(int, input().split())))\n"
    ),
    "decimal context": (  # (a call the syntax check does not see: the run puts the context back)
        "import decimal\nseen = decimal.getcontext().prec != 28\ndecimal.setcontext(decimal.Context(prec=5))\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "environment": (
        "import os\nseen = 'LEFT_OVER' in os.environ\nos.environ.update(LEFT_OVER='1')\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "global state": (  # (assigns to a module: each of its cases runs in a process of its own)
        "import collections\nseen = hasattr(collections, 'marker')\ncollections.marker = 1\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "setattr on a module": (  # (the same, through a call the syntax check sees)
        "import collections\nseen = hasattr(collections, 'marker')\nsetattr(collections, 'marker', 1)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    # State of the process changed through calls, which the run puts back between cases.
    "process state": (
        "import gc, os, signal, sys, warnings\n"
        "seen = [not gc.isenabled(), gc.get_threshold()[0] == 7, signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN,\n"
        "        signal.getsignal(signal.SIGPIPE) != signal.SIG_IGN, signal.alarm(0) > 0,\n"
        "        signal.getitimer(signal.ITIMER_VIRTUAL)[0] > 0, os.umask(0o77) == 0o77,\n"
        "        signal.SIGUSR2 in signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2]),\n"
        "        sys.getprofile() is not None, len(warnings.filters) and warnings.filters[0][0] == 'error']\n"
        "gc.disable(); gc.set_threshold(7)\nsignal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\nsignal.alarm(60)\n"
        "signal.setitimer(signal.ITIMER_VIRTUAL, 60)\nwarnings.simplefilter('error')\n"
        "sys.setprofile(lambda *args: None)\n"
        "print(-1 if any(seen) else sum(map(int, input().split())))\n"
    ),
    "resource limits": (  # (a soft limit is put back; a hard limit lowered ends the process)
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "stack, most = resource.getrlimit(resource.RLIMIT_STACK)\nmarker = 1999 * 4096\n"
        "seen = hard - soft == 3 or stack == marker\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (hard - 4, hard - 1))\n"
        "if stack > marker or stack == resource.RLIM_INFINITY:\n"
        "    resource.setrlimit(resource.RLIMIT_STACK, (marker, most))\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "descriptors": (  # (a case's first open gets 3, and what it left open is closed)
        "import os\nfirst = os.open('left.txt', os.O_WRONLY | os.O_CREAT)\n"
        "print(sum(map(int, input().split())) if first == 3 else -first)\n"
    ),
    "time zone": (
        "import os, time\nseen = time.tzname[0] == 'EST'\nos.environ.update(TZ='EST+5')\ntime.tzset()\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "garbage collector's debug flags": (
        "import gc\nseen = gc.get_debug() != 0 or len(gc.garbage) > 0\ngc.set_debug(gc.DEBUG_SAVEALL)\n"
        "a = []\na.append(a)\ndel a\ngc.collect()\nprint(-1 if seen else sum(map(int, input().split())))\n"
    ),
    # What a module holds, changed through a method (the syntax check sees it: a process per case).
    "a module's list appended to": (
        "import collections\nseen = 'marker' in collections.__all__\ncollections.__all__.append('marker')\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "a name imported from a module, changed": (
        "from sys import meta_path\nseen = len(meta_path) > 3\nmeta_path.extend([object()] * 4)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "a codec registered": (
        "import codecs\ntry:\n    codecs.lookup('leftover')\n    seen = True\nexcept LookupError:\n    seen = False\n"
        "codecs.register(lambda name: codecs.lookup('utf-8') if name == 'leftover' else None)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    # The same through a name the program binds to it, what a call returns, a method taken as a
    # value, or a function of the program given it (the check follows them: a process per case).
    "a module's list through an alias": (
        "import collections\nnames = collections.__all__\nseen = 'marker' in names\nnames.append('marker')\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "a module through an alias": (
        "import collections\nm = collections\nseen = hasattr(m, 'marker')\nm.marker = 1\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "what a call returns, changed": (
        "import logging\nseen = len(logging.getLogger().handlers) > 0\n"
        "logging.getLogger().handlers.append(logging.NullHandler())\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "a module's method taken as a value": (
        "import collections\nadd = collections.__all__.append\nseen = 'marker' in collections.__all__\nadd('marker')\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "a module's list given to a function": (
        "import collections\ndef mark(names):\n    names.append('marker')\n"
        "seen = 'marker' in collections.__all__\nmark(collections.__all__)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "a module's list changed in place through a name": (
        "from collections import __all__ as names\nseen = 'marker' in names\nnames += ['marker']\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "a module's list given to a module's function": (
        "import collections, heapq\nseen = 'marker' in collections.__all__\nheapq.heappush(collections.__all__, 'marker')\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    # A module's state set through one of its functions (`_case_state._SETS_STATE`) or held by a
    # module whose state the check cannot follow (`_KEEPS_STATE`): a process per case.
    "logging configured": (
        "import logging\nseen = bool(logging.root.handlers)\nlogging.basicConfig()\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "numpy's print options": (
        "import numpy as np\nseen = np.get_printoptions()['precision'] == 3\nnp.set_printoptions(precision=3)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "csv's field size limit": (
        "from csv import field_size_limit\nseen = field_size_limit() == 77\nfield_size_limit(77)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "the C environment": (
        "import os, time\nseen = time.tzname[0] == 'EST'\nos.putenv('TZ', 'EST+5')\ntime.tzset()\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "an event loop policy": (
        "import asyncio\nseen = type(asyncio.get_event_loop_policy()).__name__ == 'P'\n"
        "class P(asyncio.DefaultEventLoopPolicy):\n    pass\nasyncio.set_event_loop_policy(P())\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "interpreter hooks and flags": (
        "import sys\nseen = sys.get_coroutine_origin_tracking_depth() == 5 or sys.getdlopenflags() == 3\n"
        "seen = seen or sys.get_asyncgen_hooks().firstiter is not None\nsys.set_coroutine_origin_tracking_depth(5)\n"
        "sys.setdlopenflags(3)\nsys.set_asyncgen_hooks(firstiter=lambda g: None)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "CPU affinity": (
        "import os\nseen = len(os.sched_getaffinity(0)) == 1 and len(os.sched_getaffinity(0)) < os.cpu_count()\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\nprint(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "copyreg's extension registry": (
        "import copyreg\nseen = ('m', 'n') in copyreg._extension_registry\ncopyreg.add_extension('m', 'n', 12345)\n"
        "print(-1 if seen else sum(map(int, input().split())))\n"
    ),
    "a session of its own": (  # (a run of its own leads its session, so cannot move its group)
        "import os\ntry:\n    os.setpgid(0, 0)\n    moved = True\nexcept PermissionError:\n    moved = False\n"
        "print(-1 if moved or os.getsid(0) != os.getpid() else sum(map(int, input().split())))\n"
    ),
    # What shows what an earlier case did without changing a module through its names: a
    # module's private cache, the modules imported so far, a cache a module fills as it is used,
    # a module's class reached through type() or a subclass's bases, what a function of the
    # program's own returns, what a module holds stored in the program's own container.
    "a module's private cache": (
        "import re\nseen = len(re._cache) > 50\nfor i in range(60):\n    re.compile('a%d' % i)\n" + _ANSWER
    ),
    "modules imported so far": "import sys\nseen = 'fractions' in sys.modules\nimport fractions\n" + _ANSWER,
    "a cache filled by use": (
        "import linecache\nseen = len(linecache.cache) > 0\nlinecache.getline('main.py', 1)\n" + _ANSWER
    ),
    "a module's class through type()": (
        "import fractions\ncls = type(fractions.Fraction(1))\nseen = hasattr(cls, 'marker')\ncls.marker = 1\n" + _ANSWER
    ),
    "a module's class through a subclass's bases": (
        "import json\nclass E(json.JSONEncoder):\n    pass\nseen = hasattr(json.JSONEncoder, 'marker')\n"
        "E.__bases__[0].marker = 1\n" + _ANSWER
    ),
    "what a function of its own returns": (
        "import collections\ndef names():\n    return collections.__all__\nseen = 'x' in collections.__all__\n"
        "names().append('x')\n" + _ANSWER
    ),
    "stored in a container of its own": (
        "import collections\nmemo = {}\nmemo['names'] = collections.__all__\nseen = 'x' in collections.__all__\n"
        "memo['names'].append('x')\n" + _ANSWER
    ),
    # Files a case writes outside its directory: a run of its own finds /tmp, /dev/shm, HOME and
    # TMPDIR as the sandbox left them (emptied).
    "files in /tmp and /dev/shm": (
        "import os\nseen = os.path.exists('/tmp/left') or os.path.exists('/dev/shm/left')\n"
        "open('/tmp/left', 'w').close()\ntry:\n    open('/dev/shm/left', 'w').close()\nexcept OSError:\n    pass\n"
        + _ANSWER
    ),
    "files in HOME and TMPDIR": (
        "import os\nhome, tmp = os.environ['HOME'], os.environ['TMPDIR']\n"
        "seen = os.path.exists(os.path.join(home, 'left')) or os.path.exists(os.path.join(tmp, 'left2'))\n"
        "seen = seen or not (home == tmp == os.getcwd())\n"
        "open(os.path.join(home, 'left'), 'w').close()\nopen(os.path.join(tmp, 'left2'), 'w').close()\n" + _ANSWER
    ),
    # As a run of its own: main.py where the program runs, its path in argv and __file__, the
    # directory first on sys.path; a module a case wrote there is not imported by the next.
    "main.py and sys.path": (
        "import os, sys\nok = sys.argv == [__file__] and os.path.samefile(__file__, 'main.py')\n"
        "ok = ok and sys.path[0] == os.getcwd() and open('main.py').read().startswith('import os, sys')\n"
        "print(sum(map(int, input().split())) if ok else -1)\n"
    ),
    "a module written and imported": (
        "seen = True\ntry:\n    import helper\nexcept ImportError:\n    seen = False\n"
        "with open('helper.py', 'w') as f:\n    f.write('X = 0\\n')\nimport importlib\nimportlib.invalidate_caches()\n"
        "import helper\nprint(-1 if seen else sum(map(int, input().split())) + helper.X)\n"
    ),
}


def outcome(report):
    return None if report is None else (report.compiled, report.ran, [(r.passed, r.error) for r in report.results])


def test_each_program_gets_the_report_a_run_of_its_own_gives(isolated):
    programs = list(PROGRAMS.values())
    batch = run_io_programs(isolated, programs, CASES, time_s=1.0)
    differ = {}
    for name, program, report in zip(PROGRAMS, programs, batch):
        alone = run_io_cases(isolated, program, CASES, time_s=1.0)
        if outcome(report) != outcome(alone):
            differ[name] = (outcome(report), outcome(alone))
    assert not differ, f"{sorted(differ)}: {differ}"


def test_a_big_input_and_an_unusual_expected_output(isolated):
    numbers = " ".join(str(i) for i in range(30000))  # > 64 KiB: more than a pipe holds
    cases = [(numbers + "\n", str(sum(range(30000)))), ("\n\n", "")]
    program = "import sys\nprint(sum(map(int, sys.stdin.read().split())) or '')\n"
    [report] = run_io_programs(isolated, [program], cases, time_s=2.0)
    assert outcome(report) == outcome(run_io_cases(isolated, program, cases, time_s=2.0))
    assert report.results[0].passed and report.results[1].passed


def test_a_wrong_program_stops_at_its_first_wrong_answer_where_the_golden_passed(isolated):
    cases = [("1 2\n", "3\n"), ("5 5\n", "10\n"), ("2 2\n", "5\n"), ("0 0\n", "0\n")]  # case 2: golden fails
    wrong_late = "a, b = map(int, input().split())\nprint(a + b if a != 0 else 7)\n"
    wrong_where_golden_fails = "a, b = map(int, input().split())\nprint(a + b if a != 2 else 9)\n"
    programs = [GOLDEN, PROGRAMS["wrong"], wrong_late, wrong_where_golden_fails]
    golden, wrong, late, unpaid = run_io_programs(isolated, programs, cases, time_s=1.0, golden=0)
    assert [r.passed for r in golden.results] == [True, True, False, True]
    assert wrong.results[0].error == "wrong answer"
    assert all(r.error == "not run: the program was stopped after case 0 caught it" for r in wrong.results[1:])
    assert [r.error for r in late.results] == [None, None, "not run: the golden did not pass case 2", "wrong answer"]
    # a case the golden failed is no stop, and is not run: no answer there can catch a program
    assert [r.error for r in unpaid.results] == [None, None, "not run: the golden did not pass case 2", None]


def test_no_program_runs_a_case_where_the_golden_timed_out_or_failed(isolated):
    # Case 1 makes the golden run past its limit, and case 2 makes it exit with an error: the
    # other programs would spend the time limit there too, for nothing any answer could earn.
    golden = "a, b = map(int, input().split())\nwhile a == 5:\n    pass\nassert a != 7\nprint(a + b)\n"
    slow_mutant = "a, b = map(int, input().split())\nwhile a == 5:\n    pass\nprint(a * b)\n"
    cases = [("2 2\n", "4\n"), ("5 5\n", "10\n"), ("7 1\n", "8\n"), ("1 2\n", "3\n")]
    reference, mutant = run_io_programs(isolated, [golden, slow_mutant], cases, time_s=0.5, golden=0)
    assert reference.results[1].timed_out and reference.results[2].error.startswith("exit status 1")
    assert [r.error for r in mutant.results] == [
        None,
        "not run: the golden did not pass case 1",
        "not run: the golden did not pass case 2",
        "wrong answer",
    ]
    assert not any(r.timed_out for r in mutant.results)


def test_the_choice_stops_at_a_timeout_and_after_enough_wrong_programs(isolated):
    slow_on_second = "a, b = map(int, input().split())\nwhile a == 5:\n    pass\nprint(a - b)\n"
    programs = [PROGRAMS["wrong"], GOLDEN, slow_on_second, PROGRAMS["wrong on one"], PROGRAMS["raises"]]
    reports = run_io_programs(isolated, programs, CASES, time_s=0.5, stop_at_timeout=True, enough=2)
    wrong, golden, slow, wrong_on_one, raises = reports
    assert [r.error for r in wrong.results] == ["wrong answer", "wrong answer", None] and not wrong.skipped
    assert golden.all_passed
    assert slow.results[1].timed_out and slow.results[2].error == "not run: case 1 reached its time limit"
    assert wrong_on_one.results[1].error == "wrong answer"
    # two wrong programs have ended: the last one never started
    assert raises.skipped and raises.results == []


def test_no_case_reaches_another_through_files_modules_or_memory(isolated):
    # Each case of this program leaves a module and a file behind, and a global in its memory;
    # a later case of it, or another program, must find none of them.
    leaver = (
        "import os, sys\n"
        "seen = [n for n in ('json_helper.py', 'left.txt') if os.path.exists(n)]\n"
        "open('json_helper.py', 'w').write('VALUE = 1\\n')\n"
        "open('left.txt', 'w').write('x')\n"
        "sys.modules.setdefault('marker_module', 'case')\n"
        "a, b = map(int, input().split())\n"
        "print(a + b if not seen else -1)\n"
    )
    finder = (
        "import sys\n"
        "try:\n    import json_helper\n    found = 1\nexcept ImportError:\n    found = 0\n"
        "a, b = map(int, input().split())\n"
        "print(a + b if not found and 'marker_module' not in sys.modules else -1)\n"
    )
    leaver_report, finder_report = run_io_programs(isolated, [leaver, finder], CASES, time_s=1.0)
    assert leaver_report.all_passed, leaver_report.results
    assert finder_report.all_passed, finder_report.results


def test_a_case_killed_by_another_is_not_established_never_caught(isolated):
    # A program whose cases kill every process they can reach (the run's included, where they
    # can): whatever it reaches is not established, and no report counts a wrong answer.
    killer = (
        "import os, signal\n"
        "for pid in range(2, 4096):\n"
        "    if pid != os.getpid():\n"
        "        try:\n            os.kill(pid, signal.SIGKILL)\n        except OSError:\n            pass\n"
        "print(3)\n"
    )
    slow_golden = "import time\ntime.sleep(0.2)\n" + GOLDEN
    reports = run_io_programs(isolated, [slow_golden, killer, PROGRAMS["wrong"]], CASES, time_s=1.0, golden=0)
    for report in reports:
        if report is not None:
            for result in report.results:
                assert result.error in (None, "wrong answer", "not run: the program was stopped after case 0 caught it") or (
                    result.error or ""
                ).startswith(("exit status", "timed out")), result.error
    wrong = reports[2]
    if wrong is not None and reports[0] is not None:
        alone = run_io_cases(isolated, PROGRAMS["wrong"], CASES, time_s=1.0)
        assert wrong.results[0].error == alone.results[0].error


def test_bad_arguments_are_refused(isolated):
    with pytest.raises(ValueError, match="golden"):
        run_io_programs(isolated, [GOLDEN], CASES, golden=3)
    with pytest.raises(ValueError, match="enough"):
        run_io_programs(isolated, [GOLDEN], CASES, golden=0, enough=1)
    assert run_io_programs(isolated, [], CASES) == []
    [empty] = run_io_programs(isolated, [GOLDEN], [])
    assert empty.results == [] and empty.compiled


def test_which_programs_run_their_cases_in_one_process():
    from sandboxes._case_state import keeps_to_itself

    for program in (GOLDEN, PROGRAMS["thread"], PROGRAMS["recursion limit"],
                    "import sys\ninput = sys.stdin.readline\nsys.stdout = open(1, 'w')\nxs = [0]\nxs[0] = 1\n",
                    "class A:\n    def __init__(self):\n        self.x = 1\na = A()\na.x = 2\n"):
        assert keeps_to_itself(program), program
    for program in ("import collections\ncollections.marker = 1\n", "import os\nos.environ['A'] = '1'\n",
                    "from decimal import getcontext\ngetcontext().prec = 50\n", "import sys\nsys.maxsize = 1\n",
                    "import os as o\ndel o.environ['A']\n", "def f(:\n",
                    "import collections\ncollections.__all__.append('x')\n", "import sys\nsys.meta_path.insert(0, 1)\n",
                    "from sys import path\npath.append('/x')\n", "import codecs\ncodecs.register(len)\n",
                    "import os\ngetattr(os, 'environ').update(A='1')\n", "import logging\nlogging.root.handlers.clear()\n",
                    # through a name bound to it, what a call returns, a method taken as a value, a
                    # function or method given it, a parameter's default, a star import
                    "import sys\np = sys.path\nq = p\nq.append('/x')\n", "import collections as c\nm = c\nm.marker = 1\n",
                    "import os\nfor e in [os.environ]:\n    e['A'] = '1'\n", "m = __import__('math')\nm.pi = 3\n",
                    "import importlib\nimportlib.import_module('math').pi = 3\n",
                    "import logging\nlogging.getLogger().handlers.append(1)\n",
                    "import logging\nlog = logging.getLogger()\nlog.level = 5\n",
                    "import sys\nadd = sys.path.append\nadd('/x')\n", "import sys\nlist(map(sys.path.append, 'ab'))\n",
                    "import sys\ndef f(p):\n    p.append(1)\nf(sys.path)\n", "import sys\nlist.append(sys.path, '/x')\n",
                    "import sys\ndef f(p=sys.path):\n    p.append(1)\nf()\n", "from sys import *\npath.append('/x')\n",
                    "import os\nx = (os.environ if True else {})\nx['A'] = '1'\n", "class A:\n    pass\nA().x = 1\n",
                    "import sys\n[sys.path][0].append('/x')\n", "import sys\n(sys.path or []).append('/x')\n",
                    "a = eval(input())\n", "exec('import sys; sys.path.append(1)')\n",
                    "from sys import path as p\np += ['/x']\n", "import sys\nsys.path.__iadd__(['/x'])\n",
                    "import sys\nobject.__setattr__(sys, 'x', 1)\n", "import heapq, sys\nheapq.heapify(sys.path)\n",
                    "import operator, os\noperator.setitem(os.environ, 'A', '1')\n",
                    "import random, sys\nrandom.shuffle(sys.path)\n", "import sys\n(p := sys.path).append(1)\n",
                    # a module's function that sets what later cases see, called or not; a module
                    # whose state the check cannot follow
                    "import numpy as np\nnp.set_printoptions(precision=3)\n", "import numpy\nnumpy.seterr(all='ignore')\n",
                    "from os import putenv\nputenv('A', '1')\n", "import os\nf = os.sched_setaffinity\n",
                    "import csv\ncsv.field_size_limit(10)\n", "import torch\ntorch.manual_seed(0)\n",
                    "import copyreg\ncopyreg.add_extension('m', 'n', 1)\n", "import logging\n",
                    "import asyncio\n", "import ctypes\n", "from unittest import mock\n",
                    "from concurrent.futures import ThreadPoolExecutor\n", "import multiprocessing as mp\n",
                    # what shows earlier cases: private names, the modules imported, caches, counts
                    "import re\nprint(len(re._cache))\n", "from re import _cache\n", "import sys\nsys._getframe()\n",
                    "import sys\nprint('json' in sys.modules)\n", "from sys import modules\n",
                    "import os\nprint(len(os.sys.modules))\n", "import traceback\nprint(traceback.linecache.cache)\n",
                    "import gc\nprint(len(gc.get_objects()))\n", "import sys\nprint(sys.getrefcount(sys))\n",
                    # what a module holds reached through the program's own functions, containers,
                    # objects, type() or a class's bases
                    "import sys\ndef f():\n    return sys.path\nf().append('/x')\n",
                    "import sys\nf = lambda: sys.path\nf().append('/x')\n",
                    "import sys\nclass A:\n    def p(self):\n        return sys.path\nA().p().append('/x')\n",
                    "import sys\ndef g():\n    yield sys.path\nfor p in g():\n    p.append('/x')\n",
                    "import sys\ndef f():\n    return g()\ndef g():\n    return sys.path\nf().append('/x')\n",
                    "import sys\nmemo = {}\nmemo['p'] = sys.path\n", "import sys\nclass A:\n    pass\nA.p = sys.path\n",
                    "import sys\nd = {'p': sys.path}\nd['p'].append('/x')\n",
                    "import os\nd = {'e': os.environ}\nd['e']['A'] = '1'\n",
                    "import fractions\nt = type(fractions.Fraction(1))\nt.marker = 1\n",
                    "import json\nclass E(json.JSONEncoder):\n    pass\nE.__bases__[0].marker = 1\n",
                    "import json\nclass E(json.JSONEncoder):\n    pass\nb = E.__mro__\nb[1].marker = 1\n"):
        assert not keeps_to_itself(program), program
    # What a module holds, only read, or a method of a stream the run sets afresh for each case.
    for program in ("import sys\nsys.stdout.write(sys.stdin.readline())\nsys.stdout.buffer.write(b'')\n",
                    "import heapq\nh = []\nheapq.heappush(h, 1)\nh.append(2)\n",
                    "import collections\nd = collections.deque()\nd.append(1)\nd.popleft()\n",
                    "import os\nprint(os.path.join('a', 'b'), os.environ.get('A'))\n",
                    # fresh objects a module's function returned, changed; what the program made
                    "from collections import defaultdict, deque\nd = defaultdict(list)\nd['a'].append(1)\nd['b'] = [2]\n"
                    "q = deque()\nq.append(1)\nfor k, v in d.items():\n    v.sort()\n",
                    "import sys\nlines = sys.stdin.read().split()\nlines.pop()\ndata = list(map(int, lines))\ndata.sort()\n",
                    "import sys\nfor line in sys.stdin:\n    line.strip()\nout = sys.stdout\nout.write('x')\n",
                    "import numpy as np\na = np.zeros(3)\na[0] = 1\na.sort()\n",
                    "import heapq, math\nh = []\nheapq.heappush(h, (math.inf, 0))\nbest = min(math.inf, 1)\n",
                    # what the case process puts back before every case; set operations
                    "import sys, gc, random, decimal\nfrom sys import setrecursionlimit\nsetrecursionlimit(10**6)\n"
                    "sys.set_int_max_str_digits(0)\ngc.disable()\nrandom.seed(1)\ndecimal.setcontext(decimal.Context())\n",
                    "import numpy as np\nnp.random.seed(0)\nprint(np.setdiff1d([1, 2], [2]))\n",
                    "class S:\n    def set_value(self, v):\n        self.v = v\nS().set_value(1)\nd = {}\nd.setdefault(1, 2)\n",
                    "import math\ndef solve(n, k=math.pi):\n    memo = {}\n    memo[n] = k\n    return memo\nprint(solve(3), math.pi)\n",
                    # numbers and strings a module holds, stored in the program's own containers;
                    # os._exit; the program's own functions returning what it made
                    "import math, sys\nfrom math import inf\nINF = sys.maxsize\ndist = [inf] * 3\ndist[0] = math.inf\n"
                    "best = {}\nbest[1] = INF\n",
                    "import string\nletters = {}\nletters['a'] = string.ascii_lowercase\n",
                    "import os, sys\nprint(sum(map(int, sys.stdin.read().split())))\nos._exit(0)\n",
                    "import sys\ndef read():\n    return list(map(int, sys.stdin.readline().split()))\nxs = read()\n"
                    "xs.append(1)\n",
                    "from collections import deque\ndef make():\n    return deque()\nq = make()\nq.append(1)\n"):
        assert keeps_to_itself(program), program


def test_the_cases_of_a_program_share_one_process_that_leads_its_session(isolated):
    """What the one-run path is for: a program the check lets share a process runs all its cases
    in one (had the process failed to set up, every case would have run in a run of its own)."""
    program = "import os\nprint(os.getpid(), os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid())\n"
    [report] = run_io_programs(isolated, [program], [("", "")] * 3)
    printed = {result.stdout for result in report.results}
    assert len(report.results) == 3 and len(printed) == 1 and printed.pop().split()[1:] == ["True", "True"]


def test_a_program_longer_than_the_output_cap_runs_as_in_a_run_of_its_own(isolated):
    """The cap on a case's output limits the files a case writes, not the ``main.py`` the run
    writes for it."""
    program = "# " + "x" * 400 + "\n" + GOLDEN
    [report] = run_io_programs(isolated, [program], CASES, output_bytes=64)
    assert outcome(report) == outcome(run_io_cases(isolated, program, CASES, output_bytes=64))
    assert report.passed == len(CASES)
