# ruff: noqa: F821
"""The function-test driver: one sandbox run, two processes, plain data between them.

Not imported anywhere: `sandboxes.harness` sends this text into the sandbox as the program of a
run, right after the source of ``sandboxes/_crossing.py`` (whose ``encode``, ``decode``,
``send_frame``, ``recv_frame``, ``text``, ``CrossingError`` and limits it uses by name).

* **T, the test process** (the run's own process). It never executes the solution. It runs the
  problem's ``setup`` (trusted: imports, helpers such as HumanEval's ``poly``) and each test in a
  fresh namespace where every name the solution defines is a *proxy*: calling it, or a method of
  an object it returned, sends the call to the solution's process and waits for plain data back
  (`sandboxes._crossing`). It reports each test's verdict on the run's stdout, each line prefixed
  with a per-run secret read from stdin.
* **S0, the solution's process**, forked by T before T reads anything. It runs ``setup`` and the
  solution's top level, reports which names the solution defines, then answers T's calls on the
  same socket, one frame in, one frame out, each call under its own timer (what is left of the
  test's time). The tests share S0, in order, as HumanEval's ``check`` shares one process: a
  test sees what earlier calls left in the solution's state. When T has to abandon a call (the
  solution ignored its timer and T's own timer fired, S0 died, or it answered anything
  malformed), the rest of that test fails, T ends S0, reports which test comes next and ends the
  run; the host runs the tests left in a fresh run (``sandboxes.harness.run_function_tests``),
  so the next test gets a fresh copy of the state the top level left, and objects of the old
  process are gone with it. (A process per fresh copy held in reserve in every run cost each
  solution ~2 ms of CPU on a 2-core VM, a fork's page tables, copy-on-write faults and exit,
  for what happens in few runs.)

A run of many programs (`_slots_main`, the Coder–Tester's one-run catch reward) keeps three
processes per program: there S0 is the solution's *zygote*, forking a server S1 on T's first
call and a fresh one after each call T gave up on (`_serve_copies`).

Every failure that is the harness's, not the test's own check (a time-out, a value that cannot
cross, a handle asked for its truth value, length, items or an order, a dead or lying server),
is recorded with the test's verdict (``harness``), even where the test caught it and raised
something else, so that it never counts as a pass nor as a test that caught a wrong program;
every later test that fails is marked too (an earlier test may have kept the outcome for it).
Those marks are T's, where the tests' code runs (a tester's test can reach them); the solution's
side keeps its own record of every call, the *ledger* (`_SolutionLedger`: each call before it
runs and at its end, with any harness event; written to the run's stdout with a secret that
came in the solution's file), and the host combines the two (``sandboxes.harness``). A
``StopIteration`` leaving the solution arrives as a ``RuntimeError`` (PEP 479), and what a call
prints is written to the test's ``sys.stdout`` (a test's ``redirect_stdout`` sees it).

Who may read what. T opens and unlinks the tests' file before it forks S0 and reads it after;
S0 closes that descriptor, reads and deletes the solution's file, then reports whether the
solution compiles before it runs it, and T runs no test before that report. So the solution never sees the tests'
expected values and, when the tests are themselves a model's (a tester's), the tests never see
the solution (a golden one). Both are non-dumpable, so neither can open the
other's ``/proc/<pid>/mem``, ``fd`` or ``environ`` (ptrace, ``process_vm_readv`` and
``pidfd_getfd`` are refused to every run by the sandbox's job filter). The solution's processes
hold ``/dev/null`` on 0, 1 and 2 and one copy of the run's stdout for the ledger, whose secret T
never holds (it is in the solution's file); they answer only on sockets T made (in a run of many
programs, S1 on its own socket, which T passed to S0; T never receives a descriptor from the
solution's side). T imports nothing
from a directory the solution could write (the job directory and every writable path leave
``sys.path``). Whatever the solution's processes do (lie, write garbage, die, hang, signal T), the
worst outcome is tests that fail.
"""

import builtins as _builtins_module
import contextlib as _contextlib
import ctypes as _ctypes
import io as _io
import os as _os
import signal as _signal
import socket as _socket
import sys as _sys
import time as _time
import traceback as _traceback

_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
_TESTS_FILE = "harness_tests.json"
_SOLUTION_FILE = "harness_solution.json"
# The test side's own timer runs this much longer than a test's limit, so that the solution's
# per-call timer (the test's remaining time) fires first in an honest process.
_TIMER_GRACE_S = 0.5
# What one call may print, in characters: it reaches the test's ``sys.stdout`` (a test may
# capture it with ``redirect_stdout``); the test's own report keeps less (``stdout_chars``).
_CALL_STDOUT_CHARS = 1_000_000
# Builtin exceptions that a solution's exception may become on the test side; anything else (its
# own classes, SystemExit, KeyboardInterrupt, GeneratorExit) arrives as a SolutionError.
_RAISABLE = {
    name: value
    for name, value in vars(_builtins_module).items()
    if isinstance(value, type) and issubclass(value, Exception) and not name.startswith("_")
}


_LIBC = []


def _libc():
    """The C library (loaded once per process, kept for the processes it forks)."""
    if not _LIBC:
        _LIBC.append(_ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


try:
    # Loaded where the module's body runs: once per worker where the sandbox's zygote holds the
    # driver (sandboxes.core.shared_code_file), so that a run does not load it again.
    _libc().prctl  # noqa: B018  (the function pointer is cached on the library object)
except Exception:
    pass


def _non_dumpable():
    """Make this process (and what it forks) non-dumpable; whether that took effect. Without it,
    a process of the same uid could open this one's /proc/<pid>/mem, fd and environ."""
    try:
        libc = _libc()
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        return libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except Exception:
        return False


def _close_other_descriptors(*keep):
    import resource

    highest = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    highest = highest if 0 < highest < (1 << 20) else (1 << 16)
    low = 3
    for fd in sorted(keep):
        _os.closerange(low, fd)
        low = fd + 1
    _os.closerange(low, highest)


def _read_payload(name):
    import json

    with open(name, encoding="utf-8") as handle:
        payload = json.load(handle)
    _os.remove(name)
    return payload


def _load_json_fd(fd):
    """The JSON value of the whole file open on `fd` (read with plain reads: no file object)."""
    import json

    chunks = []
    while True:
        chunk = _os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    return json.loads(b"".join(chunks))


def _take_file(name):
    """Open `name` and unlink it: only this descriptor reaches its content afterwards."""
    fd = _os.open(name, _os.O_RDONLY)
    _os.remove(name)
    return fd


class _CappedText(_io.TextIOBase):
    def __init__(self, limit):
        self.parts, self.size, self.limit = [], 0, limit

    def writable(self):
        return True

    def write(self, value):
        if self.size < self.limit:
            self.parts.append(str(value)[: self.limit - self.size])
            self.size += len(self.parts[-1])
        return len(value)

    def text(self):
        return "".join(self.parts)


def _exception_text(exc):
    return "".join(_traceback.format_exception_only(type(exc), exc)).strip()


# =============================================================================================
# the solution's side (S0, S1): everything here runs in processes that execute the solution
# =============================================================================================


class _Timeout(BaseException):
    pass


# Set by the solution's timer whenever it fires: a call during which it fired is a harness event
# in the solution's own record even where the solution caught the exception and returned.
_ALARM_FIRED = [False]


def _on_alarm(signum, frame):
    _ALARM_FIRED[0] = True
    raise _Timeout()


class _SolutionLedger:
    """The solution's side's own record of the run (S0 and S1 write it; the host reads it).

    One line per event on the run's stdout (a descriptor S0 took before it put ``/dev/null`` on
    0, 1 and 2), prefixed with the solution's secret, which came in the solution's file and that
    the test process never holds. Each line is one ``write()`` of under ``PIPE_BUF`` bytes,
    starting with a newline, so a line is never split nor glued to what another process wrote.
    Events: ``{"e": "server", "s": n}`` (server n starts: S0 itself in a run of one program, a
    server the zygote forked in a run of many), ``{"e": "b", "s": n, "c": k}``
    (server n read call k, before running it), ``{"e": "e", "s": n, "c": k, "h": reason|None}``
    (call k ended; ``h``: a harness event: time-out, frame limit, a value that cannot cross, a
    request it could not read), ``{"e": "bad", "s": n, "h": reason}`` (an unreadable frame: the
    server exits) and ``{"e": "final", "servers": n}`` (S0, when the test process is done; none
    in a run that T ended after it had to drop S0, so that none of that run's failing tests
    counts as a catch). See ``sandboxes.harness._solution_marks``."""

    def __init__(self, fd, secret):
        self.fd, self.prefix = fd, ("\n" + secret).encode("ascii")
        self.server = 0

    def write(self, event):
        """Write `event`, waiting while the pipe is full (the descriptor may have been made
        non-blocking by the test process, which shares it). A write that fails otherwise exits
        this process: a call is never run, nor answered, unless its event is in the pipe."""
        import json
        import select

        if self.fd is None:
            return
        line = self.prefix + json.dumps(event, separators=(",", ":")).encode("ascii") + b"\n"
        while True:
            try:
                _os.write(self.fd, line[:4000])
                return
            except BlockingIOError:
                select.select([], [self.fd], [], 1.0)
            except OSError:
                _os._exit(1)


def _run_top_level(code, namespace, time_s, out):
    # ``sys.stdout`` swapped by hand rather than with ``redirect_stdout``: in a process forked
    # for one program, each object a context manager touches is a copy-on-write fault.
    _signal.signal(_signal.SIGALRM, _on_alarm)
    stdout = _sys.stdout
    try:
        _sys.stdout = out
        try:
            _signal.setitimer(_signal.ITIMER_REAL, time_s)
            try:
                exec(code, namespace)
            finally:
                _signal.setitimer(_signal.ITIMER_REAL, 0)
        finally:
            _sys.stdout = stdout
    except _Timeout:
        return "timed out after %gs" % time_s
    except BaseException as exc:
        return _exception_text(exc)
    return None


def _export_names(namespace, setup_names, entry_point):
    """What T may bind: ``{name: ["call"] | ["module", module name] | ["data", value]}``."""
    exported = {}
    for name, value in list(namespace.items()):
        if type(name) is not str or name.startswith("__") or (name in setup_names and name != entry_point):
            continue
        if isinstance(value, type(_os)):
            exported[name] = ["module", getattr(value, "__name__", "")]
        elif callable(value):
            exported[name] = ["call"]
        else:
            try:
                exported[name] = ["data", encode(value)]
            except Exception:
                continue  # an object that is not data: the tests cannot use it
    return exported


def _exception_record(exc):
    """``[type name, message, args as data or None]`` of an exception of the solution's."""
    try:
        message = str(exc)[:MAX_TEXT_CHARS]
    except BaseException:
        message = ""
    try:
        args = encode(tuple(exc.args))
        if len(repr(args)) > MAX_TEXT_CHARS:
            args = None
    except BaseException:
        args = None
    return [type(exc).__name__, message, args]


@_contextlib.contextmanager
def _call_alarm(time_s):
    """Interrupt the call after `time_s` (what is left of the test's time), so that a slow or
    endless call fails its own test and the process goes on serving the next ones. (A solution
    that disables this only stops answering: the test side's own timer then fails that test, and
    the next test is served by a fresh copy of the solution's state.)"""
    if time_s is None:
        yield
        return
    _signal.signal(_signal.SIGALRM, _on_alarm)
    _signal.setitimer(_signal.ITIMER_REAL, time_s)
    try:
        yield
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)


# Attributes that lead from an object (a coroutine, an async generator, a traceback, a frame) to
# the frames of this process, and from there to the driver's own state (the ledger's secret):
# never read across, as no ``__`` attribute is.
_FRAME_ATTRIBUTES = frozenset(
    {
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "tb_frame",
        "tb_next",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "gi_code",
        "cr_code",
        "ag_code",
        "cr_await",
        "gi_yieldfrom",
        "ag_await",
    }
)


class _Server:
    """S1: answers T's requests on `sock` against the solution's namespace, and writes each call
    to `ledger` before it runs and when it ends (`_SolutionLedger`)."""

    def __init__(self, sock, namespace, exported, ledger):
        self.sock, self.namespace, self.ledger = sock, namespace, ledger
        self.calls = 0
        self.callable_names = {name for name, kind in exported.items() if kind[0] == "call"}
        self.ends_run = False  # S0 of a run of one program: writes the ledger's final event
        self.objects = {}  # handle -> object
        self.handles = {}  # id(object) -> handle

    def handle_of(self, obj):
        handle = self.handles.get(id(obj))
        if handle is None or self.objects.get(handle) is not obj:
            handle = len(self.objects) + 1
            self.objects[handle] = obj
            self.handles[id(obj)] = handle
        return handle

    def resolve(self, handle):
        if handle not in self.objects:
            raise CrossingError("an unknown object handle")
        return self.objects[handle]

    def target(self, ref):
        if type(ref) is list and len(ref) == 2 and ref[0] == "n" and ref[1] in self.callable_names:
            return self.namespace[ref[1]]
        if type(ref) is list and len(ref) == 2 and ref[0] == "h" and type(ref[1]) is int:
            return self.resolve(ref[1])
        raise CrossingError("a malformed call target")

    def serve(self):
        import json

        server = self.ledger.server
        while True:
            try:
                request = recv_frame(self.sock)
            except EOFError:
                if self.ends_run:
                    # T is done (it waits for this process's exit: the event is in the pipe first).
                    self.ledger.write({"e": "final", "servers": server})
                _os._exit(0)
            except BaseException as exc:
                self.ledger.write(
                    {"e": "bad", "s": server, "h": "an unreadable request (%s)" % type(exc).__name__}
                )
                _os._exit(1)
            self.calls += 1
            self.ledger.write({"e": "b", "s": server, "c": self.calls})
            _ALARM_FIRED[0] = False
            reply = self.answer(request)
            harness = None
            if "fail" in reply or "timeout" in reply:
                harness = (
                    "timed out" if "timeout" in reply else "the call failed: %s" % str(reply["fail"])[:200]
                )
            elif _ALARM_FIRED[0]:
                harness = "timed out (the solution caught its time-out)"
            try:
                body = json.dumps(reply, separators=(",", ":"), allow_nan=True).encode("utf-8")
            except BaseException as exc:
                body, harness = None, "the reply could not be written (%s)" % type(exc).__name__
            if body is None or len(body) > MAX_FRAME_BYTES:
                if body is not None:
                    harness = "a reply of %d bytes is over the %d-byte frame limit" % (
                        len(body),
                        MAX_FRAME_BYTES,
                    )
                reply = {"id": reply.get("id"), "fail": "the result cannot cross: " + harness}
                body = json.dumps(reply, separators=(",", ":")).encode("utf-8")
            # Written before the reply leaves: the host reads this event before anything the test
            # process writes after it got the reply.
            self.ledger.write({"e": "e", "s": server, "c": self.calls, "h": harness})
            try:
                self.sock.sendall(_HEADER.pack(len(body)) + body)
            except OSError:
                _os._exit(0)

    def answer(self, request):
        out = _CappedText(_CALL_STDOUT_CHARS)
        call_id = request.get("id") if type(request) is dict else None
        mutated = []
        try:
            if type(request) is not dict or type(call_id) is not int:
                raise CrossingError("a malformed request")
            op = request.get("op")
            obj = self.target(request.get("target"))
            name = request.get("name")
            if name is not None and (
                type(name) is not str or name.startswith("__") or name in _FRAME_ATTRIBUTES
            ):
                raise CrossingError("attribute %r cannot be reached" % (name,))
            raw_args = request.get("args", [])
            raw_kwargs = request.get("kwargs", [])
            if type(raw_args) is not list or type(raw_kwargs) is not list:
                raise CrossingError("malformed arguments")
            args = [decode(item, self.resolve) for item in raw_args]
            kwargs = {}
            for pair in raw_kwargs:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                    raise CrossingError("malformed keyword arguments")
                kwargs[pair[0]] = decode(pair[1], self.resolve)
        except BaseException as exc:
            return {"id": call_id, "fail": "the request could not be read: %s" % exc}
        budget = request.get("time_s")
        if type(budget) is not float or not 0 < budget <= 86400:
            budget = None
        try:
            with _contextlib.redirect_stdout(out), _call_alarm(budget):
                if op == "call":
                    result = obj(*args, **kwargs)
                elif op == "getattr":
                    result = getattr(obj, name)
                elif op == "setattr":
                    setattr(obj, name, args[0])
                    result = None
                elif op == "getitem":
                    result = obj[args[0]]
                elif op == "setitem":
                    obj[args[0]] = args[1]
                    result = None
                elif op == "str":
                    result = str(obj)
                elif op == "repr":
                    result = repr(obj)
                else:
                    return {"id": call_id, "fail": "unknown operation"}
                # Encoded under the call's timer: a returned generator or iterator is run to
                # its end here (it crosses as the items it yields).
                try:
                    value = encode(result, self.handle_of)
                except CrossingError as exc:
                    return {
                        "id": call_id,
                        "fail": "the result cannot cross as data: %s" % exc,
                        "out": out.text(),
                    }
        except _Timeout:
            return {"id": call_id, "timeout": True, "out": out.text()}
        except BaseException as exc:
            return {"id": call_id, "raise": _exception_record(exc), "out": out.text()}
        try:
            if op == "call":
                # Arguments the call changed in place go back with the result.
                for position, (raw, arg) in enumerate(zip(raw_args, args)):
                    if type(raw) is list:
                        now = encode(arg, self.handle_of)
                        if now != raw:
                            mutated.append([position, now])
                for pair in raw_kwargs:
                    if type(pair[1]) is list:
                        now = encode(kwargs[pair[0]], self.handle_of)
                        if now != pair[1]:
                            mutated.append([pair[0], now])
        except BaseException as exc:
            return {"id": call_id, "fail": "the result cannot cross as data: %s" % exc, "out": out.text()}
        return {"id": call_id, "ok": value, "out": out.text(), "mutated": mutated}


def _solution_zygote(sock, payload=None):
    """S0: never returns. `payload`: the solution's, where the run's process already read it (a
    run of many programs, `_slots_main`); else it is read from the solution's file."""
    ledger = None
    try:
        # The run's stdout, for this side's own record (`_SolutionLedger`); 0, 1 and 2 become
        # /dev/null.
        record_fd = _os.dup(1)
        null = _os.open(_os.devnull, _os.O_RDWR)
        for target in (0, 1, 2):
            _os.dup2(null, target)
        _close_other_descriptors(sock.fileno(), record_fd)
        _non_dumpable()
        if payload is None:
            payload = _read_payload(_SOLUTION_FILE)
        # (A payload without a secret, from a caller that reads no ledger: nothing is written,
        # and the host, finding no ledger, counts no failure as a catch.)
        ledger = _SolutionLedger(
            record_fd if payload.get("record_secret") else None, str(payload.get("record_secret"))
        )
        time_s, stdout_chars = float(payload["time_s"]), int(payload["stdout_chars"])
        # The next frame, sent before any code but the driver's runs here, also says that the
        # solution's file is gone.
        sources = []
        try:
            for label in ("setup", "solution"):
                sources.append(compile(payload[label], label + ".py", "exec", dont_inherit=True))
        except BaseException as exc:
            send_frame(sock, {"kind": "compiled", "ok": False, "error": _exception_text(exc)})
            ledger.write({"e": "final", "servers": 0})
            _os._exit(0)
        send_frame(sock, {"kind": "compiled", "ok": True})
        namespace, exported, error, stdout = _run_solution(sources, payload, time_s, stdout_chars)
        send_frame(sock, {"kind": "ran", "error": error, "stdout": stdout, "names": exported})
        if error is not None:
            ledger.write({"e": "final", "servers": 0})
            _os._exit(0)
        _serve_copies(sock, namespace, exported, ledger)
    except BaseException:
        pass
    _os._exit(1)


def _serve_copies(sock, namespace, exported, ledger):
    """S0 of a run of many programs after the top level: for each one-byte request on `sock` carrying a socket (SCM_RIGHTS),
    end the previous server and fork a new one (a copy of the state the top level left) that
    answers on that socket. Returns never; exits when T closes `sock`, after writing the ledger's
    ``final`` event (and answering one byte, which T waits for)."""
    child = None
    while True:
        try:
            message, fds, _flags, _address = _socket.recv_fds(sock, 1, 1)
        except BaseException:
            message, fds = b"", []
        if not message:
            # The end: the last server is ended and reaped first (what a call T gave up on would
            # still have written is moot: the host places events by position, and T is done),
            # so that the run leaves no process for the sandbox to find, kill and reap.
            if child is not None:
                try:
                    _os.kill(child, _signal.SIGKILL)
                    _os.waitpid(child, 0)
                except OSError:
                    pass
            ledger.write({"e": "final", "servers": ledger.server})
            try:
                sock.send(b"!")
            except OSError:
                pass
            _os._exit(0)
        if child is not None:
            try:
                _os.kill(child, _signal.SIGKILL)
                _os.waitpid(child, 0)
            except OSError:
                pass
            child = None
        if len(fds) != 1:
            for fd in fds:
                _os.close(fd)
            continue
        ledger.server += 1
        ledger.write({"e": "server", "s": ledger.server})
        child = _os.fork()
        if child == 0:
            try:
                sock.close()
                server = _socket.socket(fileno=fds[0])
                _Server(server, namespace, exported, ledger).serve()
            except BaseException:
                pass
            _os._exit(1)
        _os.close(fds[0])


def _compile_solution(payload):
    """The problem's setup, the solution and, where the payload has one, the epilogue run after
    it (`run_value_checks`), compiled (raises what compiling raised)."""
    labels = ("setup", "solution", "epilogue") if payload.get("epilogue") else ("setup", "solution")
    return [compile(payload[label], label + ".py", "exec", dont_inherit=True) for label in labels]


def _run_solution(
    sources, payload, time_s, stdout_chars, epilogue_names=None, export=True, setup_namespace=None
):
    """Run the problem's setup then the solution's top level (and the epilogue, if any; each
    under its own timer) (`sources`, compiled; None: compile them first) in this process:
    ``(namespace, names it exports, error or None, what it printed)`` (no names exported
    without `export`). `epilogue_names` are bound in the namespace while the epilogue runs
    (removed after it). `setup_namespace`: where the setup already ran (`_prepared_namespace`,
    in the process this one was forked from); the solution runs in a copy of it instead."""
    namespace = {"__name__": "__solution__", "__builtins__": __builtins__}
    out = _CappedText(stdout_chars)
    if sources is None:
        try:
            sources = _compile_solution(payload)
        except BaseException as exc:
            return namespace, {}, _exception_text(exc), ""
    if setup_namespace is not None:
        namespace, error = dict(setup_namespace), None
    else:
        error = _run_top_level(sources[0], namespace, time_s, out)
    setup_names = set(namespace)
    if error is None:
        error = _run_top_level(sources[1], namespace, time_s, out)
    if error is None and len(sources) > 2:
        if epilogue_names:
            namespace.update(epilogue_names)
        error = _run_top_level(sources[2], namespace, time_s, out)
        for name in epilogue_names or ():
            namespace.pop(name, None)
    entry = payload["entry_point"]
    if error is None and entry and entry not in namespace:
        error = "the solution does not define %r" % entry
    exported = _export_names(namespace, setup_names, entry) if error is None and export else {}
    return namespace, exported, error, out.text()


def _solution_ledger(payload, record_fd):
    # (A payload without a secret, from a caller that reads no ledger: nothing is written, and
    # the host, finding no ledger, counts no failure as a catch.)
    return _SolutionLedger(
        record_fd if payload.get("record_secret") else None, str(payload.get("record_secret"))
    )


def _solution_process(link):
    """S0 of a run of one program: never returns. Reads and deletes the solution's file, reports
    on `link` whether the solution compiles and what its top level did, then answers T's calls on
    `link` itself (server 1); when T closes `link`, writes the ledger's final event and exits
    (T reaps it). Where the solution fails before the tests, the final event comes before the
    report.
    There is no other server: where T has to give up on a call, it ends S0 and the run, and the
    host runs the tests left in a fresh run (``sandboxes.harness.run_function_tests``)."""
    try:
        # The run's stdout, for this side's own record (`_SolutionLedger`); 0, 1 and 2 become
        # /dev/null.
        record_fd = _os.dup(1)
        null = _os.open(_os.devnull, _os.O_RDWR)
        for target in (0, 1, 2):
            _os.dup2(null, target)
        _close_other_descriptors(link.fileno(), record_fd)
        solution_fd = _take_file(_SOLUTION_FILE)
        payload = _load_json_fd(solution_fd)
        _os.close(solution_fd)
        ledger = _solution_ledger(payload, record_fd)
        time_s, stdout_chars = float(payload["time_s"]), int(payload["stdout_chars"])

        def end(report):
            # The solution failed before the tests: no server; the final event is in the pipe
            # before T reads the report (T then ends the run).
            ledger.write({"e": "final", "servers": 0})
            send_frame(link, report)
            _os._exit(0)

        # The next frame, sent before any code but the driver's runs here, also says that the
        # solution's file is gone.
        try:
            sources = _compile_solution(payload)
        except BaseException as exc:
            end({"kind": "compiled", "ok": False, "error": _exception_text(exc)})
        send_frame(link, {"kind": "compiled", "ok": True})
        namespace, exported, error, printed = _run_solution(sources, payload, time_s, stdout_chars)
        report = {"kind": "ran", "error": error, "stdout": printed, "names": exported}
        if error is not None:
            end(report)
        ledger.server = 1
        ledger.write({"e": "server", "s": 1})
        send_frame(link, report)
        server = _Server(link, namespace, exported, ledger)
        server.ends_run = True
        server.serve()
    except BaseException:
        pass
    _os._exit(1)


# =============================================================================================
# the test side (T): never executes the solution
# =============================================================================================


class SolutionError(Exception):
    """An exception of the solution's that is not a builtin exception (its name and message)."""


class _HarnessFailure(BaseException):
    """The harness cannot decide this test (a value that cannot cross, a solution process that
    died or answered garbage): the test fails, whatever the test code does with it."""


class _TestTimeout(BaseException):
    pass


class _Connection:
    """T's link to the solution's processes: the socket of the server that answers the calls
    (`server`), and where T asks for a new one (`control`). In a run of one program S0 is the
    only server (`control` None; T ends the run after a test that dropped it); in a run of many,
    S0 (the zygote on `control`) forks a server on first use and again after a server that had
    to be dropped."""

    def __init__(self, control, server=None, server_pid=None):
        self.control = control  # where a request for a (new) server goes
        self.server = server  # a first server that needs no request (S0 in a run of one program)
        self.server_pid = server_pid  # its pid (T's child, which T ends when it drops it)
        self.generation = 0 if server is None else 1  # which server the handles in `remotes` belong to
        self.next_id = 0
        self.remotes = {}  # handle -> _Remote
        self.poison = None  # why the current test cannot be passed (a harness failure)
        self.deadline = None  # monotonic end of the current test's time
        self.dead = None  # why the server cannot answer any more in this test

    def start_test(self, deadline):
        """A new test: no harness failure yet; a server dropped in an earlier test is replaced
        (on the next call) by a fresh copy of the solution's state."""
        self.poison, self.dead, self.deadline = None, None, deadline

    def fail(self, reason):
        if self.poison is None:
            self.poison = reason
        raise _HarnessFailure(reason)

    def drop_server(self, why):
        """The server can no longer be trusted to be in step: no further calls in this test; the
        next test gets a new server."""
        if self.dead is None:
            self.dead = why
        if self.server is not None:
            try:
                self.server.close()
            except OSError:
                pass
            if self.server_pid is not None and self.generation == 1:
                try:
                    _os.kill(self.server_pid, _signal.SIGKILL)  # S0: it may be stuck in the call
                except OSError:
                    pass
        self.server = None
        self.remotes = {}

    def ensure_server(self):
        """Ask S0 for a server (S0 ends the previous one first) unless one is up."""
        if self.server is not None:
            return
        if self.control is None:  # (never reached: T ends the run after a test that dropped S0)
            self.fail("the solution's process was replaced")
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            _socket.send_fds(self.control, [b"s"], [theirs.fileno()])
        except OSError:
            mine.close()
            self.drop_server("the solution's process is gone")
            self.fail(self.dead)
        finally:
            theirs.close()
        self.server = mine
        self.generation += 1

    def request(self, op, target, args=(), kwargs=None, name=None):
        """Send one request, wait for its answer; the value, rebuilt on this side (or the
        solution's exception, raised as a builtin exception or a `SolutionError`)."""
        if self.dead is not None:
            self.fail(self.dead)
        self.ensure_server()
        if target[0] == "h" and target[2] != self.generation:
            self.fail("an object of a solution process that was replaced after an earlier failure")
        kwargs = kwargs or {}
        self.next_id += 1
        call_id = self.next_id
        message = {"id": call_id, "op": op, "target": target[:2]}
        if self.deadline is not None:
            message["time_s"] = max(0.001, self.deadline - _time.monotonic())
        if name is not None:
            message["name"] = name
        try:
            message["args"] = [encode(arg, self.handle_id) for arg in args]
            message["kwargs"] = [[key, encode(value, self.handle_id)] for key, value in kwargs.items()]
        except (CrossingError, RecursionError) as exc:
            self.fail("an argument cannot cross to the solution: %s" % exc)
        try:
            send_frame(self.server, message)
            reply = recv_frame(self.server)
            outcome, value, printed = self.read_reply(reply, call_id, args, kwargs)
        except CrossingError as exc:
            self.drop_server("an earlier answer of the solution's was rejected (%s)" % exc)
            self.fail("the solution's answer was rejected: %s" % exc)
        except EOFError:
            self.drop_server("the solution's process exited during an earlier call")
            self.fail("the solution's process exited during a call")
        except Exception as exc:  # anything else malformed (an overflowing number, ...)
            self.drop_server("an earlier answer of the solution's was rejected (%s)" % type(exc).__name__)
            self.fail("the solution's answer was rejected (%s)" % type(exc).__name__)
        except BaseException:
            # The test side's own timer: the solution ignored its time limit and stopped answering.
            self.drop_server("the solution's process stopped answering during an earlier call")
            raise
        if printed:
            # Where the call's prints would have gone: the test's stdout (its own
            # redirect_stdout included), which is this test's capture unless it redirected it.
            try:
                _sys.stdout.write(printed)
            except Exception:
                pass
        if outcome == "fail":
            self.fail(value)
        if outcome == "timeout":
            if self.poison is None:
                self.poison = "timed out"
            raise _TestTimeout()
        if outcome == "raise":
            if isinstance(value, (StopIteration, StopAsyncIteration)):
                # As PEP 479 does for generators: it must not end the test's own loop (a map,
                # a zip, a for) as if the data had run out.
                value = RuntimeError("the solution raised %s" % type(value).__name__)
            raise value
        return value

    def read_reply(self, reply, call_id, args, kwargs):
        """``(outcome, value, printed)``: ``("ok", value)``, ``("raise", exception)``,
        ``("fail", reason)`` or ``("timeout", None)``, and what the call printed; `CrossingError`
        for anything malformed."""
        if type(reply) is not dict or reply.get("id") != call_id:
            raise CrossingError("an answer to another request")
        if set(reply) - {"id", "ok", "raise", "fail", "timeout", "out", "mutated"}:
            raise CrossingError("unexpected fields")
        printed = text(reply["out"], _CALL_STDOUT_CHARS) if "out" in reply else ""
        if reply.get("timeout") is True:
            return "timeout", None, printed
        if "fail" in reply:
            return "fail", "the solution's side: " + text(reply["fail"]), printed
        if "raise" in reply:
            raised = reply["raise"]
            if type(raised) is not list or len(raised) != 3:
                raise CrossingError("a malformed exception")
            name, message = text(raised[0], 100), text(raised[1])
            klass = _RAISABLE.get(name)
            if klass is not None:
                args = decode(raised[2]) if raised[2] is not None else None
                if type(args) is tuple:
                    try:
                        return "raise", klass(*args), printed
                    except Exception:
                        pass
                return "raise", (klass(message) if message else klass()), printed
            return "raise", SolutionError("%s: %s" % (name, message) if message else name), printed
        if "ok" not in reply:
            raise CrossingError("an answer without a value")
        resolve = self.remote
        value = decode(reply["ok"], resolve)
        mutated = reply.get("mutated", [])
        if type(mutated) is not list:
            raise CrossingError("malformed arguments")
        for entry in mutated:
            if type(entry) is not list or len(entry) != 2:
                raise CrossingError("malformed arguments")
            where, new = entry
            if type(where) is int and 0 <= where < len(args):
                _assign_into(args[where], decode(new, resolve))
            elif type(where) is str and where in kwargs:
                _assign_into(kwargs[where], decode(new, resolve))
            else:
                raise CrossingError("malformed arguments")
        return "ok", value, printed

    def handle_id(self, value):
        if type(value) is _Remote and object.__getattribute__(value, "_connection") is self:
            ref = object.__getattribute__(value, "_ref")
            if ref[0] == "h":
                if ref[2] != self.generation:
                    raise CrossingError("an object of a solution process that was replaced")
                return ref[1]
            raise CrossingError("a function of the solution's cannot be passed as an argument")
        raise CrossingError(
            "a value of type %s is not plain data and cannot cross" % type(value).__qualname__
        )

    def remote(self, handle):
        proxy = self.remotes.get(handle)
        if proxy is None:
            proxy = self.remotes[handle] = _Remote(self, ["h", handle, self.generation])
        return proxy


def _assign_into(target, new):
    """Make ``target`` (an argument of the test's) hold ``new`` in place, where it can."""
    if type(target) is list and type(new) is list:
        if len(target) == len(new):
            for index, (old, value) in enumerate(zip(target, new)):
                if type(old) is type(value) and type(old) in (list, dict, set):
                    _assign_into(old, value)
                else:
                    target[index] = value
        else:
            target[:] = new
    elif type(target) is dict and type(new) is dict:
        if set(target) == set(new):
            for key, value in new.items():
                old = target[key]
                if type(old) is type(value) and type(old) in (list, dict, set):
                    _assign_into(old, value)
                else:
                    target[key] = value
        else:
            target.clear()
            target.update(new)
    elif type(target) is set and type(new) is set:
        target.clear()
        target.update(new)
    elif type(target) is tuple and type(new) is tuple and len(target) == len(new):
        for old, value in zip(target, new):
            _assign_into(old, value)


class _Remote:
    """A name of the solution's or an object that lives in the solution's process (a *handle*).

    Calls, attribute reads, indexing, ``str`` and ``repr`` go to the solution and come back as
    data (or as another `_Remote`). A handle refuses ``bool()``, ``len()``, iteration and
    comparison: each would let the solution's object answer, with any value it likes, a question
    the test asks about a returned value that never crossed as data; the test fails, saying why
    (a harness failure, never a catch). A returned generator or builtin iterator is not a handle:
    it crosses as the items it yields. Names (the solution's functions and classes) are truthy
    and compare by identity, as functions and classes do; hashing is identity.
    """

    __slots__ = ("_connection", "_ref")

    def __init__(self, connection, ref):
        object.__setattr__(self, "_connection", connection)
        object.__setattr__(self, "_ref", ref)

    def _ask(self, op, args=(), kwargs=None, name=None):
        connection = object.__getattribute__(self, "_connection")
        return connection.request(op, object.__getattribute__(self, "_ref"), args, kwargs, name)

    def _refuse(self, what):
        connection = object.__getattribute__(self, "_connection")
        connection.fail(
            "cannot %s an object of the solution's that is not plain data (it stays in the "
            "solution's process; only values that cross as data can be checked)" % what
        )

    def _is_name(self):
        return object.__getattribute__(self, "_ref")[0] == "n"

    def __call__(self, *args, **kwargs):
        return self._ask("call", args, kwargs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", name=name)

    def __setattr__(self, name, value):
        if name.startswith("__"):
            raise AttributeError(name)
        self._ask("setattr", (value,), name=name)

    def __iter__(self):
        self._refuse("iterate over")

    def __len__(self):
        self._refuse("take len() of")

    def __contains__(self, item):
        self._refuse("use 'in' on")

    def __getitem__(self, key):
        return self._ask("getitem", (key,))

    def __setitem__(self, key, value):
        self._ask("setitem", (key, value))

    def __str__(self):
        value = self._ask("str")
        return value if type(value) is str else "<solution object>"

    def __repr__(self):
        connection = object.__getattribute__(self, "_connection")
        if connection.dead is not None:
            return "<solution object>"
        poison = connection.poison
        try:
            value = self._ask("repr")
        except Exception:
            connection.poison = poison  # a repr for a message does not decide a test
            return "<solution object>"
        return value if type(value) is str else "<solution object>"

    def __bool__(self):
        if self._is_name():
            return True
        self._refuse("take the truth value of")

    def __eq__(self, other):
        if self._is_name():
            return self is other
        self._refuse("compare")

    def __ne__(self, other):
        if self._is_name():
            return self is not other
        self._refuse("compare")

    def __lt__(self, other):
        self._refuse("compare")

    __le__ = __gt__ = __ge__ = __lt__

    def __hash__(self):
        return object.__hash__(self)


class _TestAlarm:
    def __init__(self):
        self.connection = None

    def __call__(self, signum, frame):
        if self.connection is not None and self.connection.poison is None:
            self.connection.poison = "timed out"
        raise _TestTimeout()


def _describe(exc, label, time_s):
    if isinstance(exc, _TestTimeout):
        return "timed out after %gs" % time_s
    if isinstance(exc, _HarnessFailure):
        return "not judged: %s" % (exc.args[0] if exc.args else "the harness could not decide")
    if isinstance(exc, SolutionError):
        return str(exc)
    text_ = _exception_text(exc)
    if isinstance(exc, AssertionError) and text_ == "AssertionError":
        text_ = "AssertionError: " + label
    return text_


# Standard-library modules whose import does something (a browser, a GUI, a print): never
# imported on the solution's word.
_ODD_MODULES = frozenset(
    {"antigravity", "this", "__hello__", "__phello__", "idlelib", "turtle", "turtledemo", "tkinter"}
)


def _bind_names(namespace, exported, connection, entry):
    """Bind in ``namespace`` what the solution exports: proxies, modules and small data values.

    The solution's word is checked here: a name of the setup's or a builtin's is never rebound
    (but the entry point's) — a solution's own ``set`` or ``sorted`` would otherwise compute both
    sides of ``set(f(x)) == set([...])`` — and a module is imported here only if it is one of
    the standard library's (from read-only paths)."""
    import importlib

    for name, kind in exported.items():
        if type(name) is not str or not name.isidentifier() or type(kind) is not list or not kind:
            continue
        if name != entry and (name in namespace or hasattr(_builtins_module, name)):
            continue
        if kind[0] == "call":
            namespace[name] = _Remote(connection, ["n", name])
        elif kind[0] == "module" and len(kind) == 2 and type(kind[1]) is str:
            top = kind[1].partition(".")[0]
            if top in _ODD_MODULES or not (top in _sys.stdlib_module_names or kind[1] in _sys.modules):
                continue
            try:
                namespace[name] = importlib.import_module(kind[1])
            except BaseException:
                pass
        elif kind[0] == "data" and len(kind) == 2:
            try:
                namespace[name] = decode(kind[1])
            except BaseException:
                pass


# How long T waits, at the end of the run, for the solution's side to write its ledger's final
# event (the zygote of a run of many programs has nothing else to do; S0 of a run of one writes
# it and exits, and T reaps it; a process that takes longer leaves its record incomplete, and the
# host then counts no failing test of the run as a catch; one that does not exit is left to the
# sandbox, which kills and reaps what a run leaves).
_ZYGOTE_WAIT_S = 2.0


def _on_reap_alarm(signum, frame):
    raise _TestTimeout()


def _reap_within(pid, seconds):
    """Reap the child `pid` if it exits within `seconds` (T's own timer interrupts the wait)."""
    _signal.signal(_signal.SIGALRM, _on_reap_alarm)
    _signal.setitimer(_signal.ITIMER_REAL, seconds)
    try:
        _os.waitpid(pid, 0)
    except BaseException:
        pass
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)


# Longest line a record may take (under PIPE_BUF, 4096 on Linux: one atomic write to a pipe).
_RECORD_BYTES = 4000


def _record_line(secret, record, dumps):
    """``"\\n" + secret + JSON + "\\n"`` in ASCII, at most `_RECORD_BYTES` bytes: a record whose
    captured stdout or error text would make it longer keeps less of them (their beginnings)."""
    record = dict(record)
    while True:
        line = ("\n" + secret + dumps(record) + "\n").encode("ascii", "backslashreplace")
        if len(line) <= _RECORD_BYTES:
            return line
        longest = max(("stdout", "error"), key=lambda key: len(record.get(key) or ""))
        value = record.get(longest) or ""
        if not value:
            return (
                "\n"
                + secret
                + dumps(
                    {
                        "kind": record.get("kind"),
                        "index": record.get("index"),
                        "error": "not judged: a record too long to write",
                    }
                )
                + "\n"
            ).encode("ascii")
        record[longest] = value[: len(value) // 2]


# The real paths of what ``sys.path`` and the fixed scratch directories name where the module's
# body runs (a pooled sandbox's zygote: once per worker). The directories they resolve through
# are the sandbox's read-only system paths; what a run can write is checked in every run.
def _real_paths():
    found = {}
    for path in list(_sys.path) + ["/tmp", "/var/tmp", "/dev/shm"]:
        if type(path) is str and _os.path.isabs(path):
            try:
                found[path] = _os.path.realpath(path)
            except Exception:
                pass
    return found


_REAL_PATHS = _real_paths()


def _trusted_path():
    """``sys.path`` without the job directory and anything else this run could write (a module
    planted there would run in this process when a test imports it)."""
    job = [_os.getcwd()] + [_os.environ.get(name, "") for name in ("TMPDIR", "HOME")]
    scratch = {
        _REAL_PATHS.get(path) or _os.path.realpath(path)
        for path in ["/tmp", "/var/tmp", "/dev/shm"] + job
        if path
    }
    prefixes = tuple(path.rstrip("/") + "/" for path in scratch)
    kept = []
    for entry in _sys.path:
        if not entry or not _os.path.isabs(entry):
            continue
        real = (
            _os.path.realpath(entry) if entry in job else (_REAL_PATHS.get(entry) or _os.path.realpath(entry))
        )
        if real in scratch or real.startswith(prefixes):
            continue
        # (As root, on the unsafe backend, everything is writable: nothing is isolated there.)
        if _os.getuid() != 0 and _os.access(entry, _os.W_OK):
            continue
        kept.append(entry)
    return kept


def _read_secret_line():
    """The run's secret: the first line of stdin, read with plain reads (the zygote's stdin
    object would allocate and touch its buffers in this process)."""
    line = b""
    while b"\n" not in line:
        chunk = _os.read(0, 4096)
        if not chunk:
            break
        line += chunk
    return line.partition(b"\n")[0].decode("utf-8", "replace").strip()


def _main():
    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    # The tests' file is unlinked before the fork and read after it: the solution's process
    # starts with no copy of the tests in its memory and closes its copy of the descriptor
    # before it runs anything else (_solution_process closes every descriptor but its socket).
    isolated = _non_dumpable()
    tests_fd = _take_file(_TESTS_FILE)
    connection = None
    if isolated:
        # `link`: S0's reports, then the calls.
        link, link_theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        pid = _os.fork()
        if pid == 0:
            link.close()
            _solution_process(link_theirs)
        link_theirs.close()
        connection = _Connection(None, server=link, server_pid=pid)
    secret = _read_secret_line()
    null = _os.open(_os.devnull, _os.O_RDONLY)
    _os.dup2(null, 0)
    _os.close(null)
    _sys.stdin = _io.StringIO("")
    channel = _os.dup(1)
    emit = _emitter(channel, secret)

    def finish():
        """The end of the run: S0 reads the end of its socket, writes the ledger's final event
        and exits; T reaps it (waiting a little), so that the event is in the pipe before the
        run ends and no process of the run outlives T. (An S0 that T dropped was ended by T.)"""
        try:
            link.shutdown(_socket.SHUT_WR)
            _reap_within(pid, _ZYGOTE_WAIT_S)
        except BaseException:  # no solution's process (NameError), gone, or slower than the wait
            pass
        _os._exit(0)

    if not isolated:
        # The sandbox refused prctl(PR_SET_DUMPABLE, 0): the two processes could read each
        # other's memory. Nothing runs; the host reports a sandbox failure, not a verdict.
        emit({"kind": "unisolated", "error": "the sandbox does not let a run make itself non-dumpable"})
        finish()
    payload = _load_json_fd(tests_fd)
    _os.close(tests_fd)
    _run_tests(link, emit, finish, payload, connection=connection)


def _compile_tests(tests):
    """Each test compiled, or the text of why it does not compile."""
    codes = []
    for index, test in enumerate(tests):
        try:
            codes.append(compile(test, "test_%d.py" % index, "exec", dont_inherit=True))
        except BaseException as exc:
            codes.append("test does not compile: %s" % exc)
    return codes


#: The seed of the tests' ``random`` (and numpy's, where loaded) in every run.
TEST_RANDOM_SEED = 0


def _seed_test_randomness():
    """Seed the test process's random numbers alike in every run (the worker seeds each job
    afresh, as a fresh interpreter would): tests that draw random inputs then draw the same ones
    for every program, and a test whose verdict comes from ``random`` rather than from the
    program gives the same verdict on all of them (the Coder–Tester pays a catch only for a
    verdict that the program decides)."""
    import random

    random.seed(TEST_RANDOM_SEED)
    numpy_random = _sys.modules.get("numpy.random")  # (only if loaded: importing it costs ~20 ms)
    if numpy_random is not None:
        try:
            numpy_random.seed(TEST_RANDOM_SEED)
        except Exception:
            pass


def _run_tests(control, emit, finish, payload, codes=None, verdict=None, setup_code=None, connection=None):
    """T after its set-up: wait for the solution's reports on `control`, run every test, report
    each with `emit`, end with `finish`. `codes`: the tests already compiled (else compiled here,
    while the solution's process runs the solution); `verdict(record)`: called after each test's
    record is written (in a run of many programs, to tell the run's process); `setup_code`: the
    problem's setup already compiled; `connection`: T's link to the solution's servers (else
    one whose servers the zygote on `control` forks)."""
    time_limit = float(payload["time_s"])
    stdout_chars = int(payload["stdout_chars"])
    tests = payload["tests"]
    stop_at_timeout = payload.get("stop_at_timeout") is True
    _sys.path[:] = _trusted_path()
    _os.chdir("/")
    if connection is None:
        connection = _Connection(control)
    setup_error = None
    deadline = _time.monotonic() + 2 * time_limit + 5.0
    try:
        control.settimeout(max(0.1, deadline - _time.monotonic()))
        # While the solution's process compiles and runs the solution: the problem's setup runs
        # here too (trusted, so the tests see its own helpers, never the solution's versions of
        # them), and the tests are compiled.
        base = {"__name__": "__main__", "__builtins__": __builtins__}
        _seed_test_randomness()
        try:
            if setup_code is None:
                setup_code = compile(payload["setup"], "setup.py", "exec", dont_inherit=True)
            exec(setup_code, base)
        except BaseException as exc:
            setup_error = "the problem's setup failed: " + _exception_text(exc)
        if codes is None:
            codes = _compile_tests(tests)
        # Nothing but the driver has run here yet; "compiled" also says the solution's file is
        # gone (the solution's process deleted it first).
        compiled = recv_frame(control)
        if (
            type(compiled) is not dict
            or compiled.get("kind") != "compiled"
            or type(compiled.get("ok")) is not bool
        ):
            raise CrossingError("a malformed report")
        if not compiled["ok"]:
            emit({"kind": "compiled", "ok": False, "error": text(compiled.get("error", ""))})
            finish()
        emit({"kind": "compiled", "ok": True})
        control.settimeout(max(0.1, deadline - _time.monotonic()))
        ran = recv_frame(control)
        control.settimeout(None)
        if type(ran) is not dict or ran.get("kind") != "ran" or type(ran.get("names")) is not dict:
            raise CrossingError("a malformed report")
        error = ran.get("error")
        if error is not None:
            error = text(error)
        names = ran["names"]
        top_stdout = text(ran.get("stdout", ""), stdout_chars)
    except TimeoutError:
        error, names, top_stdout = "timed out after %gs" % time_limit, {}, ""
    except BaseException as exc:
        error, names, top_stdout = (
            "the solution's process failed before the tests (%s)" % type(exc).__name__,
            {},
            "",
        )
    entry = payload["entry_point"]
    if error is None and entry and entry not in names:
        error = "the solution does not define %r" % entry
    if error is None:
        error = setup_error
    emit({"kind": "ran", "ok": error is None, "error": error, "stdout": top_stdout})
    if error is not None:
        for index in range(len(tests)):
            emit(
                {
                    "kind": "test",
                    "index": index,
                    "error": "not run: the solution failed: " + error,
                    "stdout": "",
                    "timed_out": False,
                }
            )
        emit({"kind": "done"})
        finish()
    # What every test starts from: the setup's names, then the solution's (proxies; a proxy
    # holds no state of its own, so tests can share them).
    bound = dict(base)
    _bind_names(bound, names, connection, entry)
    if entry and entry in bound:
        bound.setdefault("candidate", bound[entry])
    alarm = _TestAlarm()
    alarm.connection = connection
    earlier_failure = None  # the first harness failure of this run, once there is one
    _signal.signal(_signal.SIGALRM, alarm)
    for index, test in enumerate(tests):
        out = _CappedText(stdout_chars)
        label = test.strip().splitlines()[-1] if test.strip() else ""
        error, timed_out = None, False
        code = codes[index]
        if type(code) is str:
            emit({"kind": "test", "index": index, "error": code, "stdout": "", "timed_out": False})
            continue
        namespace = dict(bound)
        test_started = _time.monotonic()
        connection.start_test(test_started + time_limit)
        try:
            with _contextlib.redirect_stdout(out):
                _signal.setitimer(_signal.ITIMER_REAL, time_limit + _TIMER_GRACE_S)
                try:
                    exec(code, namespace)
                finally:
                    _signal.setitimer(_signal.ITIMER_REAL, 0)
        except BaseException as exc:
            error, timed_out = _describe(exc, label, time_limit), isinstance(exc, _TestTimeout)
        record = {
            "kind": "test",
            "index": index,
            "error": error,
            "stdout": out.text(),
            "timed_out": timed_out,
        }
        if connection.poison is not None:
            # The harness, not the test's own check, failed this test (a time-out, a value that
            # could not cross, a server that died): never a pass, and marked, so that a test
            # that caught it and raised AssertionError is not taken for a check that failed.
            record["harness"] = connection.poison
            if error is None:
                record["error"] = "not judged: " + connection.poison
                record["timed_out"] = connection.poison == "timed out"
            if earlier_failure is None:
                earlier_failure = "test %d: %s" % (index, connection.poison)
        elif earlier_failure is not None and record["error"] is not None:
            # Tests share this process: an earlier test could have kept the outcome of its
            # harness failure (in builtins, a file, ...) for this one to assert on. A failing
            # test after a harness failure is marked too (it can never count as a catch).
            record["harness"] = "after a harness failure in " + earlier_failure
        emit(record)
        if verdict is not None:
            verdict(record)
        # A test that took its whole time: it timed out, or the solution's timer fired during
        # a call the solution then returned from (its side marks that test in its ledger).
        if stop_at_timeout and (record["timed_out"] or _time.monotonic() - test_started >= time_limit):
            for later in range(index + 1, len(tests)):
                emit({"kind": "test", "index": later, "error": "not run: test %d reached its time limit" % index,
                      "stdout": "", "timed_out": False})
            break
        if connection.control is None and connection.server is None and index + 1 < len(tests):
            # A run of one program whose only server T had to drop (and ended): the tests left
            # are the host's to run in a fresh run, from a fresh copy of the solution's state.
            emit({"kind": "replaced", "next": index + 1})
            break
    emit({"kind": "done"})
    finish()


# =============================================================================================
# a run of many programs (the Coder–Tester's one-run catch reward)
# =============================================================================================

_SLOTS_FILE = "harness_slots.json"
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_PR_SET_CHILD_SUBREAPER = 36
# Most verdict lines M reads from one test process (one per test; the rest is drained unread).
_VERDICT_LINES = 4096


def _filter_loader(program):
    """A function that loads the seccomp filter `program` (raw BPF) on the calling process and
    says whether it took effect; built once, before the forks, so that each test process only
    makes the two calls."""
    try:

        class _Fprog(_ctypes.Structure):
            _fields_ = [("len", _ctypes.c_ushort), ("filter", _ctypes.c_void_p)]

        libc = _libc()
        buffer = _ctypes.create_string_buffer(program, len(program))
        fprog = _Fprog(len(program) // 8, _ctypes.cast(buffer, _ctypes.c_void_p))
        reference = _ctypes.byref(fprog)
    except Exception:
        return lambda: False

    def load():
        try:
            if not program or libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                return False
            return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, reference, 0, 0) == 0
        except Exception:
            return False

    load.keep = (buffer, fprog)
    return load


def _emitter(channel, secret):
    import json

    def emit(record):
        # One write() of under PIPE_BUF bytes, starting on a line of its own: the solution's
        # ledger writes to the same pipe, and neither may split the other's line.
        line = _record_line(secret, record, json.dumps)
        try:
            _os.write(channel, line)
        except OSError:
            pass

    return emit


def _slot_test_process(control, verdict_fd, payload, codes, load_filter, setup_code):
    """T of one slot, forked by M before M read anything secret: waits for its slot's turn (its
    secret, sent by M), loads the test-process filter, then is `_main`'s T. Never returns."""
    try:
        null = _os.open(_os.devnull, _os.O_RDONLY)
        _os.dup2(null, 0)
        _os.close(null)
        _close_other_descriptors(control.fileno(), verdict_fd)
        _sys.stdin = _io.StringIO("")
        go = recv_frame(control)
        secret = go.get("go") if type(go) is dict else None
        if type(secret) is not str or not secret.isalnum():
            _os._exit(0)
    except BaseException:
        _os._exit(0)
    emit = _emitter(_os.dup(1), secret)

    def finish():
        try:
            control.shutdown(_socket.SHUT_WR)
            control.settimeout(_ZYGOTE_WAIT_S)
            control.recv(1)
        except BaseException:
            pass
        _os._exit(0)

    if not load_filter():
        emit({"kind": "unfiltered", "error": "the test process's seccomp filter could not be loaded"})
        finish()

    def verdict(record):
        # For M's early stop only (the host decides from the records and the ledger): P, a
        # pass; C, a failure by the test's own assertion; X, anything else.
        error, harness = record.get("error"), record.get("harness")
        if error is None and harness is None:
            mark = b"P"
        elif harness is None and type(error) is str and error.startswith("AssertionError"):
            mark = b"C"
        else:
            mark = b"X"
        try:
            _os.write(verdict_fd, b"%d %s\n" % (record.get("index", -1), mark))
        except OSError:
            pass

    _run_tests(control, emit, finish, payload, codes, verdict, setup_code)


def _slot_solution(requests, payload, setup_code, ledger_fd, reports):
    """S, the one solution process of a slot (`_slots_main`), forked by M: compiles and runs the
    program's top level, then answers the test process's calls itself (no zygote, no server
    forked from it: M forks a replacement, which runs the top level again, where the test
    process asks for a fresh server). `requests`: its socket to M, on which it sends the
    ``compiled`` and ``ran`` reports where `reports` (M passes them on to the test process)
    and receives its server socket with its server number. Never returns."""
    try:
        null = _os.open(_os.devnull, _os.O_RDWR)
        for target in (0, 1, 2):
            _os.dup2(null, target)
        _os.close(null)
        _close_other_descriptors(requests.fileno(), ledger_fd)
        _non_dumpable()
        ledger = _SolutionLedger(
            ledger_fd if payload.get("record_secret") else None, str(payload.get("record_secret"))
        )
        time_s, stdout_chars = float(payload["time_s"]), int(payload["stdout_chars"])
        try:
            sources = [
                setup_code
                if setup_code is not None
                else compile(payload["setup"], "setup.py", "exec", dont_inherit=True),
                compile(payload["solution"], "solution.py", "exec", dont_inherit=True),
            ]
        except BaseException as exc:
            if reports:
                send_frame(requests, {"kind": "compiled", "ok": False, "error": _exception_text(exc)})
            _os._exit(0)
        if reports:
            send_frame(requests, {"kind": "compiled", "ok": True})
        namespace, exported, error, stdout = _run_solution(sources, payload, time_s, stdout_chars)
        if reports:
            send_frame(requests, {"kind": "ran", "error": error, "stdout": stdout, "names": exported})
        if error is not None:
            _os._exit(0)
        message, fds, _flags, _address = _socket.recv_fds(requests, 16, 1)
        if len(fds) != 1 or not message.isdigit():
            _os._exit(0)
        requests.close()
        ledger.server = int(message)
        _Server(_socket.socket(fileno=fds[0]), namespace, exported, ledger).serve()
    except BaseException:
        pass
    _os._exit(1)


class _SlotSolutions:
    """M's side of one slot's solution processes: forks S (`_slot_solution`), passes its
    ``compiled`` and ``ran`` reports on to the test process, gives it each server socket the
    test process sends (replacing S by a fresh one, which runs the top level again, from the
    second on), and writes the ledger events a zygote would write: ``server`` before a server
    can answer, and ``final`` once the test process is done (`sandboxes.harness._solution_marks`).
    """

    def __init__(self, control, payload, setup_code):
        self.control, self.payload, self.setup_code = control, payload, setup_code
        self.ledger = _SolutionLedger(
            _os.dup(1) if payload.get("record_secret") else None, str(payload.get("record_secret"))
        )
        self.pids = []  # every S forked, to be reaped
        self.current = None  # the live S
        self.requests = None  # M's end of the live S's socket
        self.loading = None  # that socket while S still sends its reports
        self.served = False  # the live S has been given its server socket
        self.final = False

    def start(self, reports=True):
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        ledger_fd = self.ledger.fd if self.ledger.fd is not None else _os.open(_os.devnull, _os.O_WRONLY)
        pid = _os.fork()
        if pid == 0:
            try:
                _os.setpgid(0, 0)
                mine.close()
                self.control.close()
            except OSError:
                _os._exit(1)
            _slot_solution(theirs, self.payload, self.setup_code, ledger_fd, reports)
            _os._exit(1)
        if self.ledger.fd is None:
            _os.close(ledger_fd)
        try:
            _os.setpgid(pid, pid)
        except OSError:
            pass
        theirs.close()
        self.pids.append(pid)
        self.current, self.requests, self.served = pid, mine, False
        self.loading = mine if reports else None

    def waiting_on(self):
        """The descriptors M selects on for this slot's solution side."""
        return ([self.loading] if self.loading is not None else []) + ([] if self.final else [self.control])

    def on_report(self):
        """S sent a report (or is gone): pass it on to the test process."""
        try:
            report = recv_frame(self.loading)
        except BaseException:
            report = None
        if type(report) is not dict:
            # As when a zygote dies before its reports: the test process reads the end.
            self.loading = None
            try:
                self.control.shutdown(_socket.SHUT_WR)
            except OSError:
                pass
            return
        try:
            send_frame(self.control, report)
        except OSError:
            pass
        if report.get("kind") == "ran" or report.get("ok") is not True:
            self.loading = None

    def on_request(self):
        """The test process asked for a server (a socket) or is done (the end of its socket)."""
        try:
            message, fds, _flags, _address = _socket.recv_fds(self.control, 1, 4)
        except BaseException:
            message, fds = b"", []
        if not message:
            for fd in fds:
                _os.close(fd)
            self.finish()
            return
        if len(fds) != 1:
            for fd in fds:
                _os.close(fd)
            return
        try:
            if self.served:
                # A fresh copy of the state the top level left: a new S runs it again (the
                # programs of a run of many are harness-made and deterministic).
                self.stop()
                self.start(reports=False)
            self.ledger.server += 1
            self.ledger.write({"e": "server", "s": self.ledger.server})
            try:
                _socket.send_fds(self.requests, [b"%d" % self.ledger.server], fds)
            except OSError:
                pass
            self.served = True
        finally:
            _os.close(fds[0])

    def finish(self):
        """The test process is done (or ended): the ledger's last event, and T's answer."""
        if self.final:
            return
        self.final = True
        self.ledger.write({"e": "final", "servers": self.ledger.server})
        try:
            self.control.send(b"!")
        except OSError:
            pass

    def stop(self):
        if self.current is not None:
            try:
                _os.killpg(self.current, _signal.SIGKILL)
            except OSError:
                pass
        for sock in (self.requests,):
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
        self.current = self.requests = self.loading = None

    def reap(self):
        """Kill and reap every S of the slot and whatever they left in their groups."""
        self.stop()
        for pid in self.pids:
            try:
                _os.killpg(pid, _signal.SIGKILL)
            except OSError:
                pass
            while True:
                try:
                    _os.waitpid(-pid, 0)
                except OSError:
                    break
        if self.ledger.fd is not None:
            try:
                _os.close(self.ledger.fd)
            except OSError:
                pass


def _reap_slot(tester, zygote):
    """End a slot's processes: its test process and, where given, a process group (`zygote`:
    its leader), and reap them all (M is their subreaper). (`_slots_main` passes its solution
    processes' groups to `_SlotSolutions.reap`.)"""
    for pid, group in ((tester, False), (zygote, True)):
        if pid is None:
            continue
        try:
            (_os.killpg if group else _os.kill)(pid, _signal.SIGKILL)
        except OSError:
            pass
        try:
            _os.waitpid(pid, 0)
        except OSError:
            pass
    if zygote is not None:
        while True:
            try:
                _os.waitpid(-zygote, 0)
            except ChildProcessError:
                break
            except OSError:
                break


def _slots_main():
    """M, the run's process of a run of many programs against the same tests (see
    ``sandboxes.harness.run_function_tests_slots``).

    M reads the tests (not secret from any test process), compiles them, and forks one test
    process T per slot *before* it reads anything secret: the secrets on stdin and the programs'
    file (whose order the host drew at random). Each T keeps only its own control socket and
    verdict pipe, and waits. Then, one slot at a time, M sends the slot's T its secret (its turn),
    forks the slot's one solution process S (`_slot_solution`, in a process group of its own;
    `_SlotSolutions` is M's side of it: S's reports, the server sockets T asks for, the ledger's
    ``server`` and ``final`` events), and waits for T to end; then it kills and reaps the slot's
    processes, so that no process of a slot outlives it. T loads a seccomp filter (no file written, no socket, no process, no
    signal: `sandboxes.seccomp.build_test_process_filter`) before it runs any test. T and the
    solution's side write their records to the run's stdout with their slot's own secrets, as in
    a run of one program; M writes one record of its own per slot. Early stop: once the golden
    slot has ended, M ends a later slot at its first test that failed by the test's own assertion
    (T's verdict) where the golden slot passed that test; the host checks the catch from the
    records and the ledger, and grades again on its own any program whose slot ended early
    without a catch it could confirm."""
    import json

    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    isolated = _non_dumpable()
    try:
        _ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass
    with open(_TESTS_FILE, encoding="utf-8") as handle:
        payload = json.load(handle)
    _os.remove(_TESTS_FILE)
    programs_fd = _take_file(_SLOTS_FILE)
    count = int(payload["slots"])
    load_filter = _filter_loader(bytes.fromhex(payload.get("filter") or ""))
    codes = _compile_tests(payload["tests"])
    try:
        setup_code = compile(payload["setup"], "setup.py", "exec", dont_inherit=True)
    except BaseException:
        setup_code = None  # each test process meets the same error and reports it
    # What every process of the run would import on its own, imported once here.
    import copy  # noqa: F401  (the guard of a wrong program)
    import importlib  # noqa: F401
    import resource  # noqa: F401
    import select  # noqa: F401

    links = []
    testers = []
    # Every process of the run is a fork of this one: objects that exist now are left out of
    # every later collection, so that a collection in a child does not copy their pages.
    import gc

    gc.freeze()
    if isolated:
        for _ in range(count):
            mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
            read_end, write_end = _os.pipe()
            links.append((mine, theirs, read_end, write_end))
        for k in range(count):
            pid = _os.fork()
            if pid == 0:
                _slot_test_process(links[k][1], links[k][3], payload, codes, load_filter, setup_code)
                _os._exit(1)
            testers.append(pid)
        for _mine, theirs, _read_end, write_end in links:
            theirs.close()
            _os.close(write_end)
    # Only now: the secrets and the programs.
    lines = _sys.stdin.read().split()
    null = _os.open(_os.devnull, _os.O_RDONLY)
    _os.dup2(null, 0)
    _os.close(null)
    emit = _emitter(_os.dup(1), lines[0] if lines else "")
    if not isolated:
        emit({"kind": "unisolated", "error": "the sandbox does not let a run make itself non-dumpable"})
        _os._exit(0)
    with _os.fdopen(programs_fd, encoding="utf-8") as handle:
        programs = json.load(handle)
    slots = programs["slots"]
    golden = programs.get("golden")
    early_stop = programs.get("early_stop") is True
    slot_time_s = float(programs["slot_time_s"])
    golden_passed = None  # the tests the golden slot passed, once it has ended
    # What a slot's program leaves where the next slot's would find it (the job's directory,
    # /tmp, /dev/shm), which a run of its own would not: removed once the slot has ended.
    scratch = _scratch_entries((*_SCRATCH_DIRS, _os.getcwd())) if payload.get("scratch") is True else {}
    for k in range(count):
        mine, _theirs, read_end, _write_end = links[k]
        slot_started = _time.monotonic()
        solution = None
        stopped_at, timed_out = None, False
        try:
            send_frame(mine, {"go": lines[1 + k]})
            slot_setup = setup_code if slots[k].get("setup") == payload.get("setup") else None
            solution = _SlotSolutions(mine, slots[k], slot_setup)
            solution.start()
            deadline = _time.monotonic() + slot_time_s
            passed, pending, seen = set(), b"", 0
            import select

            while stopped_at is None:
                remaining = deadline - _time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                ready = select.select([read_end] + solution.waiting_on(), [], [], remaining)[0]
                if solution.loading is not None and solution.loading in ready:
                    solution.on_report()
                if mine in ready and not solution.final:
                    solution.on_request()
                if read_end not in ready:
                    continue
                data = _os.read(read_end, 4096)
                if not data:
                    break
                pending += data
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    seen += 1
                    if seen > _VERDICT_LINES:
                        continue
                    parts = line.split()
                    if len(parts) != 2 or not parts[0].isdigit():
                        continue
                    index, mark = int(parts[0]), parts[1]
                    if k == golden and mark == b"P":
                        passed.add(index)
                    elif early_stop and golden_passed is not None and mark == b"C" and index in golden_passed:
                        stopped_at = index
                        break
            if stopped_at is not None:
                # T is ended (every record it wrote is in the pipe): the ledger's final event.
                try:
                    _os.kill(testers[k], _signal.SIGKILL)
                    _os.waitpid(testers[k], 0)
                except OSError:
                    pass
                solution.finish()
            if k == golden and not timed_out:
                golden_passed = passed
        except BaseException as exc:
            emit({"kind": "slot", "slot": k, "error": "the run's process failed (%s)" % type(exc).__name__})
        finally:
            _reap_slot(testers[k], None)
            if solution is not None:
                solution.reap()
            for fd in (read_end, mine):
                try:
                    _os.close(fd) if type(fd) is int else fd.close()
                except OSError:
                    pass
            _sweep_scratch(scratch)
        emit(
            {
                "kind": "slot",
                "slot": k,
                "stopped_at": stopped_at,
                "timed_out": timed_out,
                "seconds": round(_time.monotonic() - slot_started, 6),
            }
        )
    emit({"kind": "done"})
    _os._exit(0)


# =============================================================================================
# a run of many trusted programs graded by value (sandboxes.harness.run_value_checks)
# =============================================================================================

_CALLS_FILE = "harness_calls.json"
#: The host's compiled setup, epilogue and programs of a run graded by value: `_CALLS_CODE_MAGIC`,
#: the interpreter's ``sys.implementation.cache_tag``, a newline, then ``marshal.dumps`` of
#: ``(setup, epilogue, (program, ...))``, each a code object or None (see `_precompiled`).
_CALLS_CODE_FILE = "harness_calls_code.bin"
_CALLS_CODE_MAGIC = b"#value-checks-code "


#: How long a value check goes on after its time-out fired before its program's process ends
#: with that check timed out (`_checks_program`).
_CAUGHT_TIMEOUT_GRACE_S = 0.1
#: CPU seconds a value check may use past its time-out before the kernel ends its program's
#: process with ``SIGPROF`` (`_checks_program`; the run's process then reports that check timed
#: out, from the outcomes the process wrote before it: `_calls_main`).
_TIMEOUT_CPU_GRACE_S = 0.5


class _CheckHalt(BaseException):
    """Ends a program's checks: a harness event during a call (its kind is the outcome)."""


def _compact_encoder():
    import json

    return json.JSONEncoder(separators=(",", ":"), allow_nan=True)


# Made with the module (in the zygote, where it holds the driver): ``json.dumps`` with other
# than its default options makes an encoder each call, and each object that touches costs
# every program's process a copy-on-write fault.
_COMPACT_ENCODER = _compact_encoder()


def _crossed(value):
    """`value` as the other side of a crossing holds it: encoded, sent as JSON and rebuilt."""
    import json

    body = _COMPACT_ENCODER.encode(encode(value))
    if len(body) > MAX_FRAME_BYTES:
        raise CrossingError("a value of %d bytes is over the frame limit" % len(body))
    return decode(json.loads(body))


def _checks_program(
    result_fd, progress_fd, payload, checks, index, epilogue, sources, stop_on, golden_code, setup_namespace=None
):
    """One program's process (never returns): run the setup (or copy `setup_namespace`, where
    the run's process ran it), the program's top level and
    `epilogue` (`sources`: the three compiled before the fork; None: compile them here; the
    epilogue finds `golden_code` as ``__golden_code__``, see `_calls_main`), then
    each check's assert (`checks`: compiled, with the builtins it names) with ``candidate``
    standing for the entry point behind a crossing (the arguments and the value rebuilt as plain
    data, each call under the check's timer), in order, stopping after a failed assert on a
    check whose index is in `stop_on` (a set, or None); write ``{"ran", "error", "outcomes",
    "stopped"}`` as JSON to `result_fd` (outcomes: see ``sandboxes.harness.ValueCheckResult``),
    and each check's outcome as it comes, one line each, to `progress_fd` (what the run's
    process reads where the CPU timer ended this one: `_calls_main`)."""
    import json

    outcomes = []
    result = {"ran": False, "error": None, "outcomes": outcomes, "stopped": False}

    reporting = [False]

    def report():
        data = json.dumps(result).encode("utf-8")
        reporting[0] = True
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        _signal.setitimer(_signal.ITIMER_PROF, 0)
        try:
            while data:
                data = data[_os.write(result_fd, data) :]
        except OSError:
            pass
        _os._exit(0)

    def on_alarm(signum, frame):
        if reporting[0]:
            return
        if _ALARM_FIRED[0]:
            # The check's time-out fired `_CAUGHT_TIMEOUT_GRACE_S` ago and the check still runs:
            # the program caught it and went on (a guarded recursion catches it at every
            # level). The check timed out; nothing after it counts, so the process ends here
            # instead of at the run's deadline for the whole program. Where even this fails
            # (at the recursion limit), the CPU timer of `check_timers` ends the process.
            outcomes.append("timeout")
            try:
                report()
            except BaseException:
                outcomes.pop()
                raise
        _ALARM_FIRED[0] = True
        raise _Timeout()

    try:
        null = _os.open(_os.devnull, _os.O_RDWR)
        for fd in (0, 1, 2):
            _os.dup2(null, fd)
        _close_other_descriptors(result_fd, progress_fd)
        _signal.signal(_signal.SIGPROF, _signal.SIG_DFL)  # the CPU timer ends the process
        progress_left = _PROGRESS_BYTES
        time_s = float(payload["time_s"])
        entry = payload["entry_point"]
        program = {
            "setup": payload["setup"],
            "solution": payload["programs"][index],
            "epilogue": epilogue,
            "entry_point": entry,
        }
        namespace, _exported, error, _printed = _run_solution(
            sources,
            program,
            time_s,
            _CALL_STDOUT_CHARS,
            epilogue_names={"__golden_code__": golden_code} if golden_code else None,
            export=False,
            setup_namespace=setup_namespace if sources is not None else None,
        )
        result["error"] = error
        if error is None:
            result["ran"] = True
            function = namespace[entry]
            raised = []
            stdout, out = _sys.stdout, _CappedText(_CALL_STDOUT_CHARS)

            def candidate(*args, **kwargs):
                try:
                    args, kwargs = _crossed([list(args), kwargs])
                except CrossingError:
                    raise _CheckHalt("uncrossable") from None
                try:
                    value = function(*args, **kwargs)
                    # Encoded as a server encodes it, under the timer (an iterator runs out).
                    value = _crossed(value)
                except _Timeout:
                    raise _CheckHalt("timeout") from None
                except CrossingError:
                    raise _CheckHalt("uncrossable") from None
                except BaseException as exc:
                    if _ALARM_FIRED[0]:
                        raise _CheckHalt("timeout") from None
                    raised.append(type(exc).__name__)
                    raise
                if _ALARM_FIRED[0]:
                    raise _CheckHalt("timeout")
                return value

            for position, (code, builtins) in enumerate(checks):
                if any(name in namespace and name != entry for name in builtins):
                    outcomes.append("unestablished")
                    break
                scope = {
                    "__builtins__": {name: getattr(_builtins_module, name) for name in builtins},
                    "candidate": candidate,
                }
                del raised[:]
                _ALARM_FIRED[0] = False
                # What the check prints goes to `out` (one per program: nothing reads it). The
                # check's time-out, fired again every `_CAUGHT_TIMEOUT_GRACE_S` (`on_alarm`);
                # and a CPU timer past it whose signal the process does not handle, so that the
                # kernel ends a program that keeps its time-out from ending the check, even where
                # no handler can run (at the recursion limit; inside one long loop in C that
                # never looks for signals, such as `any(itertools.repeat(False, 10 ** 12))`).
                # (Plain statements, not context managers: each object a program's process
                # touches costs it a copy-on-write fault.)
                try:
                    _sys.stdout = out
                    _signal.signal(_signal.SIGALRM, on_alarm)
                    _signal.setitimer(_signal.ITIMER_PROF, time_s + _TIMEOUT_CPU_GRACE_S)
                    _signal.setitimer(_signal.ITIMER_REAL, time_s, _CAUGHT_TIMEOUT_GRACE_S)
                    try:
                        exec(code, scope)
                    finally:
                        _signal.setitimer(_signal.ITIMER_REAL, 0)
                        _signal.setitimer(_signal.ITIMER_PROF, 0)
                        _sys.stdout = stdout
                    outcome = "pass"
                except _CheckHalt as halt:
                    outcome = str(halt)
                except _Timeout:
                    outcome = "timeout"
                except AssertionError:
                    outcome = "raised " + raised[-1] if raised else "fail"
                except MemoryError:
                    # Out of this process's own address space (`_calls_main`): a run of its own
                    # might have gone on in a fresh process, so nothing here settles it.
                    outcome = "unestablished"
                except BaseException:
                    outcome = "raised " + raised[-1] if raised else "error"
                if _ALARM_FIRED[0] and outcome not in ("uncrossable",):
                    outcome = "timeout"
                outcomes.append(outcome)
                progress_left = _progress(progress_fd, outcome, progress_left)
                if outcome in ("timeout", "uncrossable", "unestablished"):
                    break
                if outcome == "fail" and stop_on is not None and position in stop_on:
                    result["stopped"] = True
                    break
    except BaseException as exc:
        result["error"] = "the harness failed: %s" % _exception_text(exc)
        result["harness"] = True
    report()


def _prepared_namespace(codes, name, time_s):
    """A namespace called `name` in which each of `codes` ran at top level in turn (each under
    its timer; what they print is dropped), or None where one failed or timed out."""
    namespace = {"__name__": name, "__builtins__": __builtins__}
    out = _CappedText(_CALL_STDOUT_CHARS)
    for code in codes:
        if _run_top_level(code, namespace, time_s, out) is not None:
            _ALARM_FIRED[0] = False
            return None
    return namespace


def _bare_fork():
    """libc's ``fork`` called with the GIL held, or None where it cannot be loaded.

    ``os.fork`` also runs CPython's work around a fork: the at-fork hooks (``random`` reseeds
    itself in the child) and the re-initialisation of the locks and thread states other threads
    may have held. In a process with one thread that holds no lock of CPython's (the run's
    process of `_calls_main`, between its forks) none of that is needed; skipping it saved each
    program's process ~20 copy-on-write faults and ~0.2 ms of CPU on a small VM. Its cost: the
    programs' processes share the run's ``random`` state (they are the caller's own programs)."""
    if not _BARE_FORK:
        try:
            _BARE_FORK.append(_ctypes.PyDLL(None, use_errno=True).fork)
        except Exception:
            _BARE_FORK.append(None)
    return _BARE_FORK[0]


_BARE_FORK = []
try:
    _bare_fork()  # loaded with the module's body (once per worker where its zygote holds it)
except Exception:
    pass


def _only_thread():
    """Whether this process has one thread (its /proc says so; False where it cannot be read)."""
    try:
        return len(_os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


#: Bytes a program's process writes to its progress pipe at most (under the pipe's 64 KiB, so
#: that a write never waits for a reader): past them it writes ``!`` once and no more.
_PROGRESS_BYTES = 60000


def _progress(progress_fd, outcome, left):
    """Write `outcome` as a line to `progress_fd` within the `left` bytes left (`_PROGRESS_BYTES`);
    what is left after it (-1: the progress was cut, ``!`` written)."""
    if left < 0:
        return left
    line = outcome.encode("utf-8", "replace") + b"\n"
    if len(line) >= left:  # (one byte always stays for the "!")
        line, left = b"!", 0
    _os.write(progress_fd, line)  # never waits: the pipe holds more than _PROGRESS_BYTES
    return left - len(line)


def _timed_out_report(progress_read):
    """The report (JSON bytes) of a program's process that a check's CPU timer ended: the
    outcomes it wrote to its progress pipe (one a line, all of them in the pipe's buffer), then
    ``"timeout"``; nothing (not established) where the progress was cut (``!``)."""
    import json

    _os.set_blocking(progress_read, False)
    data = b""
    try:
        while True:
            chunk = _os.read(progress_read, 1 << 16)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass
    if b"!" in data:
        return b""
    outcomes = [line.decode("utf-8", "replace") for line in data.split(b"\n")[:-1]]
    return json.dumps({"ran": True, "error": None, "outcomes": outcomes + ["timeout"], "stopped": False}).encode()


def _reported(finished, chunks):
    """The JSON object a program's process wrote (`chunks` read from its pipe), or None where
    it did not finish or wrote anything else."""
    import json

    if not finished:
        return None
    try:
        reported = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return reported if type(reported) is dict else None


def _wrong_program(reported, checks):
    """Whether a program's report (`_reported`) on `checks` checks makes it a wrong program: it
    ran, every check reported, an assert failed, and none timed out, ended on a value that
    cannot cross or a builtin the program bound, or raised ``AssertionError`` from the program
    (as ``llm_envs.envs.coder_tester.mutants.wrong_by_values`` finds on the host)."""
    if reported is None or reported.get("ran") is not True or reported.get("harness"):
        return False
    outcomes = reported.get("outcomes")
    if type(outcomes) is not list or len(outcomes) != checks or not all(type(o) is str for o in outcomes):
        return False
    if any(o in ("timeout", "uncrossable", "unestablished", "raised AssertionError") for o in outcomes):
        return False
    return "fail" in outcomes


def _precompiled(programs):
    """``(setup, epilogue, [program, ...])`` as code objects (None for any the host did not
    compile) from the host's `_CALLS_CODE_FILE`, or None where there is none, it is for another
    interpreter or for other flags, or it is not what the host writes (for `programs` programs)."""
    import marshal

    try:
        with open(_CALLS_CODE_FILE, "rb") as handle:
            tag, _, blob = handle.read().partition(b"\n")
        _os.remove(_CALLS_CODE_FILE)
    except OSError:
        return None
    if tag != _CALLS_CODE_MAGIC + (_sys.implementation.cache_tag or "none").encode("ascii") or _sys.flags.optimize:
        return None
    try:
        setup, epilogue, codes = marshal.loads(blob)
    except Exception:
        return None
    code_type = type(_precompiled.__code__)
    if type(codes) is not tuple or len(codes) != programs:
        return None
    if not all(code is None or type(code) is code_type for code in (setup, epilogue, *codes)):
        return None
    return setup, epilogue, list(codes)


def _compiled_quietly(source, filename):
    """`source` compiled as a program's process compiles it, its compile-time warnings
    dropped (that process's stderr is /dev/null); None where it does not compile."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compile(source, filename, "exec", dont_inherit=True)
    except BaseException:
        return None


def _address_space_for(memory_mb):
    """The ``RLIMIT_AS`` pair for a process forked from this one to run one program: what this
    process maps now plus `memory_mb` (what a run of its own may hold), within this process's
    own limits; ``None`` without a positive `memory_mb` or where it cannot be read (the run's
    own limits still hold). So a program that eats memory meets ``MemoryError`` in its own
    process (reported as not established) instead of taking the run over its budget, which
    would establish nothing for every program of the run."""
    import resource

    if type(memory_mb) is not int or memory_mb <= 0:
        return None
    try:
        with open("/proc/self/statm", "rb") as handle:
            pages = int(handle.read().split()[0])
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError, IndexError):
        return None
    limit = pages * resource.getpagesize() + memory_mb * 1024 * 1024
    for bound in (soft, hard):
        if bound != resource.RLIM_INFINITY:
            limit = min(limit, bound)
    return (limit, hard)


#: Directories outside its own that a program in a run of many may write, as a run of its own
#: may (each run of its own finds them as the sandbox's worker left them: wiped); with the job's
#: directory, where the next program would find what it left. Watched and swept only where the
#: host says the sandbox wipes them between runs (the payload's ``scratch``; not the unsafe
#: backend, whose /tmp is the host's).
_SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def _scratch_entries(directories):
    """``{directory: names}``: what each of `directories` that exists and can be listed holds."""
    found = {}
    for directory in directories:
        try:
            found[directory] = frozenset(_os.listdir(directory))
        except OSError:
            pass
    return found


def _scratch_changed(found):
    """Whether a directory of `found` (`_scratch_entries`) holds anything it did not hold then."""
    for directory, kept in found.items():
        try:
            if not kept.issuperset(_os.listdir(directory)):
                return True
        except OSError:
            pass
    return False


def _sweep_scratch(found, also_kept=()):
    """Remove what a program or case left in the directories of `found` (`_scratch_entries`):
    every entry each did not hold then, but the paths in `also_kept` (the case process's own
    directory). A file that was there and was only changed is not seen."""
    for directory, kept in found.items():
        try:
            names = _os.listdir(directory)
        except OSError:
            continue
        for name in names:
            path = _os.path.join(directory, name)
            if name in kept or path in also_kept:
                continue
            if _os.path.isdir(path) and not _os.path.islink(path):
                _remove_tree(path)
            else:
                try:
                    _os.unlink(path)
                except OSError:
                    pass


def _calls_main():
    """A run of many programs graded by value: each program in a process of its own, forked from
    this one (at most ``parallel`` at a time), ended and reaped with its whole process group when
    it is done or out of time; one record per program (``{"kind": "calls", "program": i, ...}``,
    ``"killed": true`` where it did not finish within its time, ``"left_files": true`` where it
    ran beside a program that left a file in the job's directory, /tmp or /dev/shm, ``"skipped":
    true`` where it did not start: ``enough``) and a final ``{"kind": "done"}``. Only trusted programs run here
    (the caller's own mutants), and only checks that reach nothing but the values of their
    calls (``sandboxes.harness.ValueCheck``)."""
    import resource
    import select

    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    secret = _read_secret_line()
    emit = _emitter(_os.dup(1), secret)
    payload = _read_payload(_CALLS_FILE)
    # Compiled once, here: every program's process runs the same code objects.
    checks = [
        (
            compile(source, "<test>", "exec", dont_inherit=True),
            [n for n in names if type(n) is str and not n.startswith("_") and hasattr(_builtins_module, n)],
        )
        for source, names in payload["checks"]
    ]
    # The program's top level, then each call, under their timers; then a second of slack.
    budget = float(payload["time_s"]) * (len(payload["checks"]) + 2) + 1.0
    parallel = payload.get("parallel")
    parallel = parallel if type(parallel) is int and 1 <= parallel <= 8 else 1
    golden = payload.get("golden")
    golden = golden if type(golden) is int and 0 <= golden < len(payload["programs"]) else None
    # The golden program first: once it has ended, each program started after it stops at its
    # first failed assert on a check the golden passed (nothing after that changes whether the
    # program was caught).
    waiting = sorted(range(len(payload["programs"])), key=lambda index: index != golden)
    golden_passed = [None]  # the indices of the checks the golden passed, once known
    # `enough` (a run without a golden: the choice of a problem's mutants, which keeps the
    # first wrong ones): no program starts once `enough` of the programs that have ended are
    # wrong programs (`_wrong_program`): the first `enough` wrong ones are then among those
    # started before it. The others are reported skipped, not judged.
    enough = payload.get("enough")
    enough = enough if type(enough) is int and enough >= 1 and golden is None else None
    wrong = {}  # index -> whether that program's report makes it a wrong program (`enough`)
    skipped = []
    running = {}  # read end -> [index, pid, deadline, chunks]
    # Everything compiled before the first fork: compiling in a program's process would pay a
    # copy-on-write fault for every page the compiler writes (2-3 ms of a 7 ms process on a
    # small VM), and so would this process after a fork. The host sends the setup, the epilogue
    # (the guard of a wrong program) and the programs compiled (`_precompiled`; a problem's are
    # the same at every step, and compiling them here cost ~4 ms a run); what it did not send
    # is compiled here, once. What does not compile is compiled again in the program's
    # process, which reports the error as a run of its own would.
    epilogue = payload.get("epilogue") or ""
    # A trusted program that is not graded (the golden of a run without one among its programs),
    # compiled with them, last.
    reference = payload.get("reference") if golden is None else None
    reference = reference if type(reference) is str and reference else None
    sources = payload["programs"] + ([reference] if reference is not None else [])
    sent = _precompiled(len(sources))
    setup_code, epilogue_code, solution_codes = sent if sent is not None else (None, None, [None] * len(sources))
    if setup_code is None:
        setup_code = _compiled_quietly(payload["setup"], "setup.py")
    if epilogue and epilogue_code is None:
        epilogue_code = _compiled_quietly(epilogue, "epilogue.py")
    solution_codes = [
        code if code is not None else _compiled_quietly(program, "solution.py")
        for code, program in zip(solution_codes, sources)
    ]
    # What the epilogue finds as ``__golden_code__``: the setup and the golden program (or the
    # reference), each as source and as the code compiled here, so that the guard of a wrong
    # program runs the golden without compiling it in every program's process (~0.5 ms each).
    if golden is not None:
        golden_source, golden_compiled = payload["programs"][golden], solution_codes[golden]
    elif reference is not None:
        golden_source, golden_compiled = reference, solution_codes[-1]
    else:
        golden_source = golden_compiled = None
    # The setup, and the golden's namespace for the guard (the setup and the golden run in a
    # namespace of their own), run once here: each program's process starts from a copy (its
    # fork) instead of running them again; every page that work writes in a program's process
    # would be a copy-on-write fault there. Where either fails here, each program's process runs
    # it itself (and reports what a run of its own would).
    time_s = float(payload["time_s"])
    setup_namespace = _prepared_namespace([setup_code], "__solution__", time_s) if setup_code is not None else None
    golden_code = None
    if golden_compiled is not None and setup_code is not None:
        golden_namespace = None
        if setup_namespace is not None:
            golden_namespace = _prepared_namespace([setup_code, golden_compiled], "__golden__", time_s)
        golden_code = (payload["setup"], setup_code, golden_source, golden_compiled, golden_namespace)

    address_space = _address_space_for(payload.get("memory_mb"))
    # A program that leaves a file where another can read it (the job's directory, /tmp,
    # /dev/shm), which a run of its own would not find: every program alive since the last time
    # nothing was left there could have read it, so none of them is established (the host grades
    # each in a run of its own). Checked as each program ends; what was left is removed.
    scratch = _scratch_entries((*_SCRATCH_DIRS, _os.getcwd())) if payload.get("scratch") is True else {}
    exposed = set()  # programs alive since the scratch directories were last found as they were
    left_files = set()  # programs not established for that

    # This process never starts a thread; the check guards the bare fork all the same.
    fork = (_bare_fork() if _only_thread() else None) or _os.fork

    def start(index):
        own_epilogue = epilogue if index != golden else ""
        sources = [setup_code, solution_codes[index]] + ([epilogue_code] if own_epilogue else [])
        if any(code is None for code in sources):
            sources = None
        read_end, write_end = _os.pipe()
        progress_read, progress_write = _os.pipe()
        pid = fork()
        if pid < 0:
            raise OSError(_ctypes.get_errno(), "fork failed")
        if pid == 0:
            try:
                _os.setpgid(0, 0)
                _os.close(read_end)
                _os.close(progress_read)
                if address_space is not None:
                    resource.setrlimit(resource.RLIMIT_AS, address_space)
            except BaseException:
                _os._exit(1)
            stop_on = None if index == golden else golden_passed[0]
            _checks_program(
                write_end,
                progress_write,
                payload,
                checks,
                index,
                own_epilogue,
                sources,
                stop_on,
                golden_code,
                setup_namespace,
            )
        _os.close(write_end)
        _os.close(progress_write)
        running[read_end] = [index, pid, _time.monotonic() + budget, [], progress_read]
        exposed.add(index)

    def end(read_end, finished):
        index, pid, _deadline, chunks, progress_read = running.pop(read_end)
        _os.close(read_end)
        for kill in (_os.killpg, _os.kill):
            try:
                kill(pid, _signal.SIGKILL)
            except OSError:
                pass
        status = 0
        try:
            status = _os.waitpid(pid, 0)[1]
        except OSError:
            pass
        if finished and _os.WIFSIGNALED(status) and _os.WTERMSIG(status) == _signal.SIGPROF:
            # A check's CPU timer ended the process (it kept its time-out from ending the
            # check): that check timed out, after the outcomes it wrote as they came.
            chunks[:] = [_timed_out_report(progress_read)]
        _os.close(progress_read)
        if _scratch_changed(scratch):
            if exposed != {index}:  # (a program alone since the last check read only its own)
                left_files.update(exposed)
            _sweep_scratch(scratch)
        exposed.clear()
        exposed.update(entry[0] for entry in running.values())
        # Only the golden's report is read now (its passes let the next programs stop early),
        # and, with `enough`, every report (whether to start the next program); the others once
        # every program has ended.
        ended.append((index, finished, chunks))
        if enough is not None:
            wrong[index] = index not in left_files and _wrong_program(_reported(finished, chunks), len(checks))
            if sum(wrong.values()) >= enough:
                skipped.extend(waiting)
                del waiting[:]
        if index == golden and index not in left_files:
            reported = _reported(finished, chunks)
            if reported is not None and reported.get("ran") is True and not reported.get("harness") and type(reported.get("outcomes")) is list:
                golden_passed[0] = {i for i, outcome in enumerate(reported["outcomes"]) if outcome == "pass"}

    # Records are made and written once every program has ended: between forks this process
    # does as little as it can (each page it writes while a child shares it is copied; parsing
    # each report as it came cost ~40 such faults a program).
    ended = []
    while waiting or running:
        while waiting and len(running) < parallel:
            start(waiting.pop(0))
        now = _time.monotonic()
        for read_end in [fd for fd, entry in running.items() if entry[2] <= now]:
            end(read_end, False)
        if not running:
            continue
        left = max(0.0, min(entry[2] for entry in running.values()) - now)
        ready, _, _ = select.select(list(running), [], [], left)
        for read_end in ready:
            chunk = _os.read(read_end, 1 << 16)
            if chunk:
                running[read_end][3].append(chunk)
            else:
                end(read_end, True)
    for index, finished, chunks in ended:
        record = {"kind": "calls", "program": index}
        reported = _reported(finished, chunks)
        if index in left_files:
            record["left_files"] = True
        elif reported is not None:
            record.update(
                ran=reported.get("ran"),
                error=reported.get("error"),
                outcomes=reported.get("outcomes"),
                harness=bool(reported.get("harness")),
                stopped=reported.get("stopped") is True,
            )
        else:
            record["killed"] = True
        emit(record)
    for index in skipped:
        emit({"kind": "calls", "program": index, "skipped": True})
    emit({"kind": "done"})
    _os._exit(0)


# =============================================================================================
# a run of many trusted stdin/stdout programs (sandboxes.harness.run_io_programs)
# =============================================================================================

_IO_FILE = "harness_io.json"
#: The beginning of a case's stdout that its record carries (the verdict is made here, on all of
#: it), and the end of its stderr kept for the last line of a traceback.
_IO_STDOUT_CHARS = 2000
_IO_STDERR_TAIL = 4096


def _exit_status(exc):
    """The exit status ``python main.py`` gives for `exc`, a ``SystemExit`` (a message code is
    printed to stderr, as the interpreter does)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        _sys.stderr.write(str(code) + "\n")
    except BaseException:
        pass
    return 1


def _unnamed_file(data=b""):
    """A new file no other process can open by name (created unlinked in the working
    directory: a case of another program could read or rewrite a named one), holding `data`,
    at offset 0."""
    try:
        fd = _os.open(".", _os.O_RDWR | _os.O_TMPFILE, 0o600)
    except (AttributeError, OSError):
        path = "io-" + _os.urandom(16).hex()
        fd = _os.open(path, _os.O_RDWR | _os.O_CREAT | _os.O_EXCL, 0o600)
        _os.unlink(path)
    view = memoryview(data)
    while view:
        view = view[_os.write(fd, view) :]
    if data:
        _os.lseek(fd, 0, 0)
    return fd


_ITIMERS = ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")


def _process_state():
    """What a case of `_io_cases_process` could change in the process through a call the host's
    syntax check does not see (``_case_state.keeps_to_itself`` sees assignments), read before the
    first case: the signal handlers and mask, the garbage collector's switch, thresholds and
    debug flags, the umask, the resource limits (the CPU limit is set per case), the priority, the C locale
    and the warning filters. `_put_back_process_state` puts it back after each case."""
    import _locale
    import _signal as signals  # (the C module: ``signal.getsignal`` makes an enum of each value, 30x slower)
    import gc
    import resource
    import warnings

    handlers = {}
    for number in _signal.valid_signals():
        try:
            handler = signals.getsignal(number)
        except (ValueError, OSError):
            continue
        if handler is not None:
            handlers[number] = handler
    umask = _os.umask(0o22)
    _os.umask(umask)
    limits = {
        getattr(resource, name): resource.getrlimit(getattr(resource, name))
        for name in dir(resource)
        if name.startswith("RLIMIT_") and name != "RLIMIT_CPU"
    }
    return {
        "handlers": handlers,
        "mask": _signal.pthread_sigmask(_signal.SIG_BLOCK, []),
        "gc": (gc.isenabled(), gc.get_threshold(), gc.get_debug()),
        "umask": umask,
        "limits": limits,
        "priority": _os.getpriority(_os.PRIO_PROCESS, 0),
        "locale": _locale.setlocale(_locale.LC_ALL, None),
        "warnings": list(warnings.filters),
    }


def _put_back_process_state(state):
    """Put back what `_process_state` read, stop every interval timer (a fresh interpreter has
    none), and switch off what a fresh interpreter starts without: a trace or profile function
    (of this thread and of new threads), ``faulthandler``, ``tracemalloc``, a default socket
    time-out. False where something cannot be put back (a resource limit's hard limit
    lowered, the priority lowered): the process must not run another case."""
    import _locale
    import _signal as signals
    import gc
    import resource

    for name in _ITIMERS:
        signals.setitimer(getattr(signals, name), 0)
    signals.pthread_sigmask(signals.SIG_SETMASK, state["mask"])
    for number, handler in state["handlers"].items():
        if signals.getsignal(number) != handler:
            try:
                signals.signal(number, handler)
            except (ValueError, OSError):
                return False
    enabled, thresholds, debug = state["gc"]
    gc.enable() if enabled else gc.disable()
    gc.set_threshold(*thresholds)
    if gc.get_debug() != debug:
        gc.set_debug(debug)
    del gc.garbage[:]  # (what ``DEBUG_SAVEALL`` or an uncollectable cycle kept)
    _os.umask(state["umask"])
    intact = True
    for limit, value in state["limits"].items():
        if resource.getrlimit(limit) != value:
            try:
                resource.setrlimit(limit, value)
            except (ValueError, OSError):
                intact = False
    if _os.getpriority(_os.PRIO_PROCESS, 0) != state["priority"]:
        intact = False  # (a process may lower its own priority, not raise it back)
    if _locale.setlocale(_locale.LC_ALL, None) != state["locale"]:
        try:
            _locale.setlocale(_locale.LC_ALL, state["locale"])
        except _locale.Error:
            intact = False
    _sys.settrace(None)
    _sys.setprofile(None)
    modules = _sys.modules
    if "threading" in modules:
        modules["threading"].settrace(None)
        modules["threading"].setprofile(None)
    warnings = modules.get("warnings")
    if warnings is not None and warnings.filters != state["warnings"]:
        warnings.filters[:] = state["warnings"]
        warnings._filters_mutated()  # (the registries of warnings already shown go stale)
    if "faulthandler" in modules and modules["faulthandler"].is_enabled():
        modules["faulthandler"].disable()
    if "tracemalloc" in modules and modules["tracemalloc"].is_tracing():
        modules["tracemalloc"].stop()
    if "socket" in modules and modules["socket"].getdefaulttimeout() is not None:
        modules["socket"].setdefaulttimeout(None)
    return intact


def _close_stray_descriptors(keep):
    """Close the descriptors a case left open (``os.open``, a file object in a reference cycle),
    so that the next case's first ``open`` gets the number it would get in a run of its own.
    Cycles are collected first: a file object closed later would close a number reused since."""
    import gc

    def stray():
        try:
            return [fd for fd in map(int, _os.listdir("/proc/self/fd")) if fd not in keep]
        except OSError:  # (no /proc: nothing to do)
            return []

    if len(stray()) > 1:  # (one: listdir's own descriptor)
        gc.collect()
        for fd in stray():
            try:
                _os.close(fd)
            except OSError:
                pass


def _flush_streams(status):
    """`status` after flushing ``sys.stdout`` and ``sys.stderr`` (120 where stdout fails, as
    CPython's exit; the worker's ``_flush_streams``)."""
    for stream in (_sys.stdout, _sys.stderr):
        try:
            if stream is None or stream.closed:  # (skipped, as CPython's exit skips them)
                continue
            stream.flush()
        except BaseException:
            if stream is _sys.stdout and status == 0:
                status = 120
    for stream in (_sys.__stdout__, _sys.__stderr__):  # (replaced ones: flushed when finalized)
        if stream is not None and stream is not _sys.stdout and stream is not _sys.stderr:
            try:
                stream.flush()
            except BaseException:
                pass
    return status


def _io_cases_process(
    codes, sources, cases, control_fd, report_fd, out_fd, err_fd, address_space, cpu_s, cap, directory, scratch
):
    """The process that runs cases (never returns): it reads ``"<program> <case>\n"`` on
    `control_fd` (``"end\n"``: it exits), runs that case of that program as the sandbox's worker
    runs ``python main.py`` (sandboxes/_worker_main.py, ``_run_program``: a fresh ``__main__``,
    the case's input on descriptor 0 in an unnamed file, stdout and stderr into the files
    `out_fd` and `err_fd` that the run's process holds, emptied first; the same exit status and
    traceback), puts back what the case could leave to the next, and writes ``"<status>
    <leaving>\n"`` on `report_fd`, then waits for the next.

    Put back between cases: the builtins, ``sys.modules`` (a module a case imported stays), the
    recursion, integer-string and thread-switch limits, ``os.environ`` (and the time zone read
    from it), decimal's context and the threads' stack size (a fresh interpreter's),
    ``sys.path`` (the working directory, then the read-only entries; a module imported from the
    directory leaves ``sys.modules`` with the case), ``sys.argv`` and ``main.py`` (written into the
    directory for each case, as a run of its own has it there),
    ``sys``'s streams, the exit handlers, the random seed, the files in the working
    `directory` (also ``HOME`` and ``TMPDIR`` here, as a run of its own has its directory), what
    a case added to the directories of `scratch` (`_scratch_entries`: ``/tmp``, ``/dev/shm``, the
    job's directory, as they were before the first case; empty on the unsafe backend), and the
    process's state of `_put_back_process_state` (signals, timers, the garbage collector, umask,
    resource limits, locale, warning filters, trace functions). A case
    that leaves a thread running, or a limit or priority that cannot be put back, ends the
    process after its report (``leaving`` 1; the run's process starts a new one). Anything it
    cannot set up ends it with ``SIGKILL`` (the case is then not established)."""
    import atexit
    import resource
    import types

    try:
        _os.setsid()  # (a session and process group of its own, as a run of its own has)
        _os.chdir(directory)
        _close_other_descriptors(control_fd, report_fd, out_fd, err_fd)
        # This process's own descriptors go to the top of the range, so that a case's first
        # ``open`` gets descriptor 3, as in a run of its own.
        top = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if 8 <= top <= (1 << 20):
            moved = []
            for fd, high in zip((control_fd, report_fd, out_fd, err_fd), range(top - 1, top - 5, -1)):
                if fd != high:
                    _os.dup2(fd, high, inheritable=False)
                    _os.close(fd)
                moved.append(high)
            control_fd, report_fd, out_fd, err_fd = moved
        # (SIGPIPE stays ignored, as CPython sets it and a run of its own has it)
        _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)  # past the cap a write fails instead
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, address_space)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap + 1 if hard == resource.RLIM_INFINITY else min(cap + 1, hard), hard))
        _os.environ["HOME"] = _os.environ["TMPDIR"] = directory
        state = _process_state()
        path = [entry for entry in _sys.path if entry and not _os.access(entry, _os.W_OK)]
        main_path = _os.path.join(directory, "main.py")
        inside = directory + _os.sep
        builtins = dict(_builtins_module.__dict__)
        modules = dict(_sys.modules)
        module_type = type(_sys)
        environment = dict(_os.environ)
        switch = _sys.getswitchinterval()
        recursion = _sys.getrecursionlimit()
        digits = _sys.get_int_max_str_digits() if hasattr(_sys, "get_int_max_str_digits") else None
        pending = b""
    except BaseException:
        _os.kill(_os.getpid(), _signal.SIGKILL)
    while True:
        try:
            while b"\n" not in pending:
                chunk = _os.read(control_fd, 4096)
                if not chunk:
                    _os._exit(0)
                pending += chunk
            line, pending = pending.split(b"\n", 1)
            if line == b"end":
                _os._exit(0)
            program, case = (int(part) for part in line.split())
            # CPU for this case (a backstop: the run's process ends a case at its deadline)
            used = resource.getrusage(resource.RUSAGE_SELF)
            used = int(used.ru_utime + used.ru_stime)
            soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
            limit = used + cpu_s
            resource.setrlimit(resource.RLIMIT_CPU, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
            stdin_fd = _unnamed_file(cases[case])
            if stdin_fd != 0:  # (0 where the last case closed it: ``open(0)``)
                _os.dup2(stdin_fd, 0)
                _os.close(stdin_fd)
            for fd, target in ((out_fd, 1), (err_fd, 2)):
                _os.ftruncate(fd, 0)
                _os.lseek(fd, 0, 0)
                _os.dup2(fd, target)
            _sys.stdin = _sys.__stdin__ = _io.TextIOWrapper(
                _io.BufferedReader(_io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="strict"
            )
            _sys.stdout = _sys.__stdout__ = _io.TextIOWrapper(
                _io.BufferedWriter(_io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="strict"
            )
            _sys.stderr = _sys.__stderr__ = _io.TextIOWrapper(
                _io.BufferedWriter(_io.FileIO(2, "w", closefd=False)),
                encoding="utf-8",
                errors="backslashreplace",
                line_buffering=True,
            )
            atexit._clear()
            if "random" in _sys.modules:  # a fresh interpreter seeds it from the OS
                _sys.modules["random"].seed()
            if "numpy.random" in _sys.modules:  # (as the worker's ``_run_program`` does)
                _sys.modules["numpy.random"].seed(int.from_bytes(_os.urandom(4), "little"))
            # As a run of its own: ``main.py`` in the working directory, its path in ``sys.argv``
            # and ``__file__``, the directory first on ``sys.path``.
            source = sources[program].encode("utf-8", "surrogatepass")
            size_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
            if len(source) >= size_limit[0]:  # (the output cap limits the case's files, not this one)
                resource.setrlimit(resource.RLIMIT_FSIZE, (size_limit[1], size_limit[1]))
            main_fd = _os.open(main_path, _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC, 0o600)
            try:
                written = 0
                while written < len(source):
                    written += _os.write(main_fd, source[written:])
            finally:
                _os.close(main_fd)
                if len(source) >= size_limit[0]:
                    resource.setrlimit(resource.RLIMIT_FSIZE, size_limit)
            module = types.ModuleType("__main__")
            module.__file__ = main_path
            module.__builtins__ = _builtins_module
            _sys.modules["__main__"] = module
            _sys.argv[:] = [main_path]
            _sys.path[:] = [directory, *path]
            code = codes[program] if codes[program] is not None else None
        except BaseException:
            _os.kill(_os.getpid(), _signal.SIGKILL)
        status = 0
        try:
            exec(code if code is not None else compile(sources[program], "main.py", "exec", dont_inherit=True),
                 module.__dict__)
        except SystemExit as exc:
            status = _exit_status(exc)
        except BaseException as exc:
            tb = exc.__traceback__
            if tb is not None and tb.tb_frame.f_code is _io_cases_process.__code__:
                tb = tb.tb_next
            try:
                _traceback.print_exception(type(exc), exc, tb)
            except BaseException:
                pass
            status = 1
        try:
            threading = _sys.modules.get("threading")
            if threading is not None:
                threading._shutdown()
            atexit._run_exitfuncs()
        except SystemExit as exc:
            status = _exit_status(exc)
        except BaseException:
            pass
        status = _flush_streams(status)
        try:  # as a run of its own: the globals finalized (an unflushed file writes), a second flush
            module.__dict__.clear()
        except BaseException:
            pass
        status = _flush_streams(status)
        try:
            del module
            for name in [name for name in _builtins_module.__dict__ if name not in builtins]:
                del _builtins_module.__dict__[name]
            for name, value in builtins.items():
                if _builtins_module.__dict__.get(name, _os) is not value:
                    _builtins_module.__dict__[name] = value
            # ``sys.modules``: what was there goes back; of what a case added, only modules it
            # imported from the interpreter's read-only paths stay (a later case imports them
            # from there, as it would import them); not one from the working directory, which
            # held what this case wrote there.
            for name, value in list(_sys.modules.items()):
                if name in modules:
                    if value is not modules[name]:
                        _sys.modules[name] = modules[name]
                elif type(value) is not module_type or str(getattr(value, "__file__", "")).startswith(inside):
                    del _sys.modules[name]
            _sys.path_importer_cache.pop(directory, None)
            for name, value in modules.items():
                if name not in _sys.modules:
                    _sys.modules[name] = value
            _sys.setrecursionlimit(recursion)
            if digits is not None:
                _sys.set_int_max_str_digits(digits)
            _sys.setswitchinterval(switch)
            intact = _put_back_process_state(state)
            _close_stray_descriptors((0, 1, 2, control_fd, report_fd, out_fd, err_fd))
            if dict(_os.environ) != environment:
                _os.environ.clear()
                _os.environ.update(environment)
                if "time" in _sys.modules:  # (a case that set TZ and called tzset)
                    _sys.modules["time"].tzset()
            # State a module keeps for the process, changed by a call the syntax check cannot see:
            # decimal's context (``setcontext``), the stack size of new threads. Where a case first
            # imported them, a fresh interpreter's defaults.
            if "decimal" in _sys.modules:
                _sys.modules["decimal"].setcontext(_sys.modules["decimal"].Context())
            if "threading" in _sys.modules:
                _sys.modules["threading"].stack_size(0)
            if _os.getcwd() != directory:
                _os.chdir(directory)
            for name in _os.listdir("."):
                _remove_tree(name) if _os.path.isdir(name) and not _os.path.islink(name) else _os.unlink(name)
            _sweep_scratch(scratch, also_kept=(directory,))
            threading = _sys.modules.get("threading")
            leaving = not intact or not (threading is None or threading.active_count() == 1)
            _os.write(report_fd, b"%d %d\n" % (status, leaving))
        except BaseException:
            _os.kill(_os.getpid(), _signal.SIGKILL)
        if leaving:
            _os._exit(0)


def _io_main():
    """A run of many programs on stdin/stdout cases. A process forked from this one
    (`_io_cases_process`) runs the cases one after another, as this one tells it, the golden's
    first; each case's output is compared here with the case's expected output (equal as
    whitespace-separated tokens). The process is killed with its process group when a case runs
    past ``time_s`` (that case ``timeout``); where it ends with cases left, a new one runs them.
    A program the host marks ``fresh`` (it could leave state in a module for a later case) has a
    process of its own for each case. One record per case run (``{"kind": "io_case",
    "program", "case", "outcome", "status", "stdout", "error"}``, outcome ``pass``, ``wrong
    answer``, ``exit`` (a status but 0), ``timeout``, ``output`` or ``unestablished`` (the
    process ended by a signal this one did not send)), one per program (``{"kind":
    "io_program", "program", "compiled", "skipped", "stopped", "timeout_stop"}``) and a final
    ``{"kind": "done"}``. Only trusted programs run here (the caller's golden solution and
    mutants of it); the cases are data."""
    import collections
    import select

    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    secret = _read_secret_line()
    emit = _emitter(_os.dup(1), secret)
    payload = _read_payload(_IO_FILE)
    programs = payload["programs"]
    cases = [(str(stdin).encode("utf-8"), str(expected).split()) for stdin, expected in payload["cases"]]
    time_s = float(payload["time_s"])
    cap = int(payload["output_bytes"])
    golden = payload.get("golden")
    golden = golden if type(golden) is int and 0 <= golden < len(programs) else None
    enough = payload.get("enough")
    enough = enough if type(enough) is int and enough >= 1 and golden is None else None
    stop_at_timeout = payload.get("stop_at_timeout") is True
    sent = _precompiled(len(programs))  # the host's compiled programs, where it sent them
    codes = sent[2] if sent is not None else [None] * len(programs)
    codes = [code if code is not None else _compiled_quietly(source, "main.py") for code, source in zip(codes, programs)]
    inputs = [stdin for stdin, _expected in cases]
    home = _os.getcwd()
    scratch = _scratch_entries((*_SCRATCH_DIRS, home)) if payload.get("scratch") is True else {}
    cpu_s = int(time_s) + 2  # a backstop per case: the deadline below ends a case first
    address_space = _address_space_for(payload.get("memory_mb"))

    # A program whose cases could see what an earlier case left in a module ("fresh", decided on
    # the host) runs each case in a process of its own; the others share one.
    fresh = payload.get("fresh")
    fresh = fresh if type(fresh) is list and len(fresh) == len(programs) else [True] * len(programs)
    order = sorted(range(len(programs)), key=lambda index: index != golden)
    todo = collections.deque((index, case) for index in order for case in range(len(cases)))
    outcomes = {}  # (program, case) -> outcome
    started = set()
    skipped = set()
    stopped = {}  # program -> the case that caught it
    timeout_stop = {}  # program -> the case that reached its time limit
    ended_wrong = [0]
    dropped = set()  # programs none of whose cases run any more

    def wrong_program(index):
        mine = [outcomes.get((index, case)) for case in range(len(cases))]
        return (
            index not in timeout_stop and "timeout" not in mine and "unestablished" not in mine and "wrong answer" in mine
        )

    def next_task():
        """The next case to run, or None; a program's last case ended counts toward `enough`."""
        while todo:
            index, case = todo[0]
            if index in dropped:
                todo.popleft()
                continue
            if golden is not None and index != golden and outcomes.get((golden, case)) != "pass":
                # No answer of a program on a case the golden did not pass can catch it (the
                # golden's cases ran first); the host reports it not run.
                todo.popleft()
                continue
            if index not in started and enough is not None and ended_wrong[0] >= enough:
                skipped.add(index)
                dropped.add(index)
                continue
            return todo.popleft()
        return None

    def finished(index, case):
        """Bookkeeping after a case of `index` ended with its outcome recorded."""
        outcome = outcomes[(index, case)]
        if outcome == "timeout" and stop_at_timeout:
            timeout_stop.setdefault(index, case)
            dropped.add(index)
        if outcome == "wrong answer" and golden is not None and index != golden:
            if outcomes.get((golden, case)) == "pass" and index not in stopped:
                stopped[index] = case
                dropped.add(index)
        if enough is not None and (index in dropped or not any(t[0] == index for t in todo)):
            if index not in counted:
                counted.add(index)
                ended_wrong[0] += wrong_program(index)

    counted = set()

    def record(index, case, outcome, status, out_fd, err_fd):
        outcomes[(index, case)] = outcome
        stdout = _os.pread(out_fd, _IO_STDOUT_CHARS * 4, 0)
        size = _os.fstat(err_fd).st_size
        stderr = _os.pread(err_fd, _IO_STDERR_TAIL, max(0, size - _IO_STDERR_TAIL))
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        emit({
            "kind": "io_case",
            "program": index,
            "case": case,
            "outcome": outcome,
            "status": status,
            "stdout": stdout.decode("utf-8", "replace")[:_IO_STDOUT_CHARS],
            "error": tail[0] if tail else "",
        })
        finished(index, case)

    def verdict(case, out_fd, status):
        """A case's outcome from its exit status and its stdout file."""
        if _os.fstat(out_fd).st_size > cap:
            return "output"  # (a write past the cap failed: the process's file size limit)
        if status != 0:
            return "exit"
        text = _os.pread(out_fd, cap + 1, 0).decode("utf-8", "replace")
        return "pass" if text.split() == cases[case][1] else "wrong answer"

    def spawn():
        """A new process for cases, its files and pipes."""
        directory = _os.path.join(home, "cases-" + _os.urandom(8).hex())
        _os.mkdir(directory, 0o700)
        _os.chdir(directory)
        try:
            out_fd, err_fd = _unnamed_file(), _unnamed_file()
        finally:
            _os.chdir(home)
        control_r, control_w = _os.pipe()
        report_r, report_w = _os.pipe()
        pid = _os.fork()
        if pid == 0:
            _io_cases_process(
                codes, programs, inputs, control_r, report_w, out_fd, err_fd, address_space, cpu_s, cap, directory,
                scratch,
            )
        _os.close(control_r)
        _os.close(report_w)
        return {"pid": pid, "control": control_w, "report": report_r, "out": out_fd, "err": err_fd,
                "directory": directory, "task": None, "buffer": b"", "fresh": False}

    def retire(worker, status=None):
        """Close a process's pipes and files; reap it (killed first unless `status` is given)."""
        if status is None:
            _kill_group(worker["pid"])
            try:
                _os.waitpid(worker["pid"], 0)
            except OSError:
                pass
        else:
            _kill_group(worker["pid"])  # what it left behind
        for fd in (worker["control"], worker["report"], worker["out"], worker["err"]):
            try:
                _os.close(fd)
            except OSError:
                pass
        _remove_tree(worker["directory"])
        _sweep_scratch(scratch)  # (a killed case could not sweep up after itself)

    worker = None
    while True:
        task = next_task()
        if task is None:
            break
        index, case = task
        if worker is not None and (fresh[index] is not False or worker["fresh"]):
            try:
                _os.write(worker["control"], b"end\n")
            except OSError:
                pass
            retire(worker)
            worker = None
        if worker is None:
            worker = spawn()
        started.add(index)
        worker["task"] = task
        worker["fresh"] = fresh[index] is not False  # (no later case may run in its process)
        try:
            _os.write(worker["control"], b"%d %d\n" % (index, case))
        except OSError:
            pass
        deadline = _time.monotonic() + time_s
        line = None
        while line is None:
            left = deadline - _time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([worker["report"]], [], [], left)
            if not ready:
                continue
            chunk = _os.read(worker["report"], 4096)
            if not chunk:
                break  # the process ended in the middle of the case
            worker["buffer"] += chunk
            if b"\n" in worker["buffer"]:
                line, worker["buffer"] = worker["buffer"].split(b"\n", 1)
        if line is not None:
            try:
                status, leaving = (int(part) for part in line.split())
            except ValueError:
                status, leaving = None, 1
            if status is None:
                retire(worker)
                worker = None
                outcomes[(index, case)] = "unestablished"
                emit({"kind": "io_case", "program": index, "case": case, "outcome": "unestablished", "status": 0,
                      "stdout": "", "error": ""})
                finished(index, case)
                continue
            record(index, case, verdict(case, worker["out"], status), status, worker["out"], worker["err"])
            if leaving:
                try:
                    _os.waitpid(worker["pid"], 0)
                except OSError:
                    pass
                retire(worker, status=0)
                worker = None
            continue
        # Past the deadline, or the process ended by itself in the middle of the case.
        timed_out = _time.monotonic() >= deadline
        if timed_out:
            _kill_group(worker["pid"])
        try:
            status = _os.waitpid(worker["pid"], 0)[1]
        except OSError:
            status = 0
        code = _os.WEXITSTATUS(status) if _os.WIFEXITED(status) else -_os.WTERMSIG(status)
        if timed_out:
            outcome = "timeout"
        elif _os.WIFSIGNALED(status):
            outcome = "unestablished"
        else:
            # (``os._exit`` in the program: its status is the case's, as a run of its own gives it)
            outcome = verdict(case, worker["out"], code)
        record(index, case, outcome, code, worker["out"], worker["err"])
        retire(worker, status=status)
        worker = None
    if worker is not None:
        try:
            _os.write(worker["control"], b"end\n")
        except OSError:
            pass
        retire(worker)
    for index in range(len(programs)):
        emit({
            "kind": "io_program",
            "program": index,
            "compiled": codes[index] is not None,
            "skipped": index in skipped,
            "stopped": stopped.get(index),
            "timeout_stop": timeout_stop.get(index),
        })
    emit({"kind": "done"})
    _os._exit(0)


def _remove_tree(path):
    """Remove `path` and everything under it, as far as it can."""
    try:
        for root, directories, files in _os.walk(path, topdown=False):
            for name in files:
                try:
                    _os.unlink(_os.path.join(root, name))
                except OSError:
                    pass
            for name in directories:
                full = _os.path.join(root, name)
                try:
                    _os.unlink(full) if _os.path.islink(full) else _os.rmdir(full)
                except OSError:
                    pass
        _os.rmdir(path)
    except OSError:
        pass


def _kill_group(pid):
    """End a case's process group (its process leads it; `_io_main` reaps the process)."""
    for kill in (_os.killpg, _os.kill):
        try:
            kill(pid, _signal.SIGKILL)
        except OSError:
            pass


def _entry():
    """What a run does: call every program of a calls file, grade every program of a slots file,
    else the one solution. The loader calls this on the module a worker's zygote holds
    (sandboxes/harness.py, _LOADER)."""
    if _os.path.exists(_CALLS_FILE):
        _calls_main()
    if _os.path.exists(_IO_FILE):
        _io_main()
    (_slots_main if _os.path.exists(_SLOTS_FILE) else _main)()


if __name__ == "__main__":
    _entry()
