"""The warm worker: a Python process that lives *inside* the sandbox and runs one job per fork.

This file is not imported by the host. Its source text is handed to a fresh interpreter as
``python -I -S -B -c <source>`` inside the sandbox, so it must use the standard library only and
must not rely on the ``sandboxes`` package being importable there.

Protocol (length-prefixed JSON frames, 4-byte big-endian length):
    host -> worker: config frame, then job frames
    worker -> host: ready frame, then one result frame per job
The worker reads frames on the descriptor that was its stdin and writes on the one that was its
stdout; both are moved to high numbers and closed in every job child, so a program can never
speak the protocol.

Per job the worker:
    1. writes ``main.py`` and the job's files into a fresh directory on its private work area,
    2. forks a child that starts a new session, redirects 0/1/2, sets rlimits (address space on
       top of the worker's own, CPU, processes, file size, open files, no core files) and
       executes the source in a fresh ``__main__`` module,
    3. reads stdout/stderr up to the cap, enforces the wall-clock deadline, and on exit,
       timeout or overflow kills *every* process the job left behind (the whole pid namespace
       when it has one to itself, else every descendant: the worker is a child subreaper, so
       daemonized grandchildren are reparented to it and cannot escape),
    4. removes the job directory and wipes scratch directories.
"""

import atexit
import ctypes
import gc
import io
import json
import math
import os
import resource
import select
import shutil
import signal
import struct
import sys
import time
import traceback
import types

_HEADER = struct.Struct(">I")
_MIB = 1024 * 1024
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(fd):
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(header)[0])
    if body is None:
        return None
    return json.loads(body.decode("utf-8"))


def _send(fd, obj):
    body = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    data = _HEADER.pack(len(body)) + body
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _load_seccomp(bpf_hex):
    """Install a seccomp filter (raw BPF from the host) on this process and all its children."""
    libc = ctypes.CDLL(None, use_errno=True)
    program = bytes.fromhex(bpf_hex)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def _become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _vm_bytes():
    with open("/proc/self/statm", "rb") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _count_own_processes():
    """Processes of this real uid visible here (the kernel counts these against RLIMIT_NPROC)."""
    uid = os.getuid()
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat("/proc/" + name).st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _descendants(root_pid):
    """All live descendants of root_pid, from /proc (parents listed before their children)."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # Field 4 (ppid) follows the command name, which may itself contain ') '.
        fields = stat[stat.rfind(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    found, frontier = [], [root_pid]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            found.append(child)
            frontier.append(child)
    return found


def _rmtree(path):
    """Remove a tree even if the program made parts of it unreadable (it owns them, so chmod)."""

    def fix_and_retry(function, failed_path, _exc_info):
        try:
            os.chmod(os.path.dirname(failed_path) or ".", 0o700)
            if os.path.isdir(failed_path) and not os.path.islink(failed_path):
                os.chmod(failed_path, 0o700)
                shutil.rmtree(failed_path, ignore_errors=True)
            else:
                function(failed_path)
        except OSError:
            pass

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=fix_and_retry)
    return not os.path.lexists(path)


class Worker:
    def __init__(self, config, in_fd, out_fd):
        self.config = config
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.kill_all = bool(config.get("kill_all"))
        self.work_root = config["work_dir"]
        self.scratch_dirs = list(config.get("scratch_dirs", ()))
        self.scratch_keep = set(config.get("scratch_keep", ()))
        self.job_counter = 0
        self.is_pid1 = os.getpid() == 1

    # -- cleanup -----------------------------------------------------------------------------
    def kill_leftovers(self, deadline_s=10.0):
        """Kill and reap every process the job left. Returns (processes killed, all gone?)."""
        killed = 0
        give_up = time.monotonic() + deadline_s
        while True:
            alive = False
            if self.kill_all:
                # kill(-1) reaches every process this uid may signal except ourselves and the
                # namespace's init: exactly the job's leftovers here (own pid ns or own uid).
                try:
                    os.kill(-1, signal.SIGKILL)
                    alive = True
                except ProcessLookupError:
                    pass
            else:
                for pid in _descendants(os.getpid()):
                    try:
                        os.kill(pid, signal.SIGKILL)
                        alive = True
                    except ProcessLookupError:
                        pass
            reaped_any = False
            while True:
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                killed += 1
                reaped_any = True
            if not alive and not reaped_any:
                try:
                    # Nothing signalled and nothing reaped; make sure no child is still a zombie.
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        alive = True
                except ChildProcessError:
                    return killed, True
                if not alive:
                    return killed, True
            if time.monotonic() > give_up:
                return killed, False
            if not reaped_any:
                time.sleep(0.001)

    # -- one job -----------------------------------------------------------------------------
    def run_job(self, job):
        self.job_counter += 1
        limits = job["limits"]
        job_dir = os.path.join(self.work_root, "job-%d" % self.job_counter)
        os.mkdir(job_dir, 0o700)
        main_path = os.path.join(job_dir, "main.py")
        source = job["source"]
        with open(main_path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(source)
        for name, content_hex in job.get("files", {}).items():
            path = os.path.join(job_dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(bytes.fromhex(content_hex))
        stdin_fd = os.memfd_create("stdin", 0)
        stdin_data = job.get("stdin", "").encode("utf-8", "surrogatepass")
        view = memoryview(stdin_data)
        while view:
            view = view[os.write(stdin_fd, view):]
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # Budget the program's memory on top of what it inherits from this warm process.
        address_space = _vm_bytes() + limits["memory_mb"] * _MIB
        process_budget = limits["max_processes"] + (_count_own_processes() if not self.is_pid1 else 1)
        gc.collect()
        gc.freeze()  # keep inherited objects' pages shared after fork
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            self._child(job_dir, main_path, source, stdin_fd, out_w, err_w, limits, address_space, process_budget)
        os.close(out_w)
        os.close(err_w)
        os.close(stdin_fd)
        result = self._supervise(pid, start, out_r, err_r, limits)
        killed, clean = self.kill_leftovers()
        result["leftover_processes"] = killed
        tidy = _rmtree(job_dir)
        for scratch in self.scratch_dirs:
            try:
                for entry in os.listdir(scratch):
                    path = os.path.join(scratch, entry)
                    if entry in self.scratch_keep or (self.work_root + "/").startswith(path + "/"):
                        continue
                    tidy = _rmtree(os.path.join(scratch, entry)) and tidy
            except OSError:
                pass
        result["worker_clean"] = clean and tidy
        return result

    def _supervise(self, pid, start, out_r, err_r, limits):
        cap = limits["output_bytes"]
        deadline = start + limits["time_s"]
        pidfd = os.pidfd_open(pid)
        buffers = {out_r: bytearray(), err_r: bytearray()}
        truncated = {out_r: False, err_r: False}
        open_fds = [out_r, err_r]
        timed_out = False
        overflow = False
        status = None
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                readable, _, _ = select.select(open_fds + [pidfd], [], [], remaining)
                for fd in readable:
                    if fd == pidfd:
                        continue
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        open_fds.remove(fd)
                        continue
                    buffers[fd] += chunk
                    if len(buffers[fd]) > cap:
                        truncated[fd] = True
                        overflow = True
                if overflow:
                    break
                if pidfd in readable:
                    # The program exited. Take what is already in the pipes, but do not wait for
                    # EOF: a background child may hold them open.
                    for fd in open_fds:
                        while len(buffers[fd]) <= cap:
                            ready, _, _ = select.select([fd], [], [], 0)
                            if not ready:
                                break
                            chunk = os.read(fd, 65536)
                            if not chunk:
                                break
                            buffers[fd] += chunk
                        if len(buffers[fd]) > cap:
                            truncated[fd] = True
                    _, raw_status = os.waitpid(pid, 0)
                    status = raw_status
                    break
            duration = time.monotonic() - start
            if status is None:
                # Time limit or output overflow: kill the whole job; the caller sweeps the rest.
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
                os.waitpid(pid, 0)
        finally:
            os.close(pidfd)
            os.close(out_r)
            os.close(err_r)
        if status is None:
            exit_code = None
        elif os.WIFSIGNALED(status):
            exit_code = -os.WTERMSIG(status)
        else:
            exit_code = os.WEXITSTATUS(status)
        stdout = bytes(buffers[out_r][:cap])
        stderr = bytes(buffers[err_r][:cap])
        stderr_text = stderr.decode("utf-8", "replace")
        tail = stderr_text.rstrip().rsplit("\n", 1)[-1]
        oom = exit_code is not None and exit_code != 0 and tail.startswith("MemoryError")
        return {
            "stdout": stdout.decode("utf-8", "replace"),
            "stderr": stderr_text,
            "stdout_truncated": truncated[out_r],
            "stderr_truncated": truncated[err_r],
            "exit_code": exit_code,
            "timed_out": timed_out,
            "oom": oom,
            "duration_s": duration,
        }

    def _child(self, job_dir, main_path, source, stdin_fd, out_w, err_w, limits, address_space, process_budget):
        """Runs in the forked child; never returns."""
        status = 1
        try:
            os.setsid()
            os.dup2(stdin_fd, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, 1 << 20)  # protocol pipes, pidfds, memfd: none of the program's business
            os.chdir(job_dir)
            cpu_s = int(math.ceil(limits["time_s"])) + 1
            for which, value in (
                (resource.RLIMIT_CPU, cpu_s),
                (resource.RLIMIT_AS, address_space),
                (resource.RLIMIT_NPROC, process_budget),
                (resource.RLIMIT_FSIZE, limits["file_size_mb"] * _MIB),
                (resource.RLIMIT_NOFILE, limits["open_files"]),
                (resource.RLIMIT_CORE, 0),
            ):
                resource.setrlimit(which, (value, value))
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.environ["HOME"] = job_dir
            os.environ["TMPDIR"] = job_dir
            sys.stdin = sys.__stdin__ = io.TextIOWrapper(
                io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="strict"
            )
            sys.stdout = sys.__stdout__ = io.TextIOWrapper(
                io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="strict"
            )
            sys.stderr = sys.__stderr__ = io.TextIOWrapper(
                io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                encoding="utf-8",
                errors="backslashreplace",
                line_buffering=True,
            )
            status = _run_program(source, main_path, job_dir)
        except BaseException:  # the child must never fall back into the worker loop
            try:
                os.write(2, b"sandbox: failed to start the program\n")
            except OSError:
                pass
            status = 1
        os._exit(status)

    def serve(self):
        while True:
            job = _recv(self.in_fd)
            if job is None:
                return
            # Acknowledge first: if this worker dies before the ack, the host knows the job never
            # started and can safely give it to another worker.
            _send(self.out_fd, {"accepted": True})
            _send(self.out_fd, self.run_job(job))


def _exit_status_of(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def _run_program(source, main_path, job_dir):
    """Execute the program as a fresh ``__main__`` and return its exit status, like ``python main.py``."""
    atexit._clear()  # the worker's exit handlers are not the program's
    # A fresh interpreter seeds its RNGs from the OS; forks of one worker would otherwise share them.
    if "random" in sys.modules:
        sys.modules["random"].seed()
    numpy_random = sys.modules.get("numpy.random")  # only if loaded: importing it costs ~20 ms
    if numpy_random is not None:
        try:
            # An explicit seed: numpy's own entropy gathering costs ~30 ms on first use.
            numpy_random.seed(int.from_bytes(os.urandom(4), "little"))
        except Exception:
            pass
    module = types.ModuleType("__main__")
    module.__file__ = main_path
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    sys.argv[:] = [main_path]
    sys.path.insert(0, job_dir)
    status = 0
    try:
        code = compile(source, main_path, "exec", dont_inherit=True)
        exec(code, module.__dict__)
    except SystemExit as exc:
        status = _exit_status_of(exc)
    except BaseException as exc:
        tb = exc.__traceback__
        # Drop this function's own frame so the traceback reads like plain ``python main.py``.
        if tb is not None and tb.tb_frame.f_code is _run_program.__code__:
            tb = tb.tb_next
        try:
            traceback.print_exception(type(exc), exc, tb)
        except BaseException:
            pass
        status = 1
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()  # join non-daemon threads, as interpreter exit does
        atexit._run_exitfuncs()
    except SystemExit as exc:
        status = _exit_status_of(exc)
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            if stream is sys.stdout and status == 0:
                status = 120  # what CPython returns when flushing stdout fails at exit
    return status


def main():
    # Move the protocol channel away from 0/1 so nothing else writes into it by accident.
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    config = _recv(in_fd)
    if config is None:
        return
    if config.get("sys_path") is not None:  # None: keep the interpreter's own (docker image)
        sys.path[:] = config["sys_path"]
    sys.dont_write_bytecode = True
    for name, value in config.get("env", {}).items():
        os.environ[name] = value
    work_dir = config.get("work_dir")
    if not work_dir:
        import tempfile

        work_dir = tempfile.mkdtemp(prefix=config.get("work_dir_prefix") or "sandbox-worker-")
        config["work_dir"] = work_dir
    os.makedirs(work_dir, exist_ok=True)
    subreaper = os.getpid() == 1 or _become_subreaper()
    preloaded, failed = [], {}
    for module_name in config.get("preload", ()):
        try:
            __import__(module_name)
            preloaded.append(module_name)
        except BaseException as exc:  # a broken optional module must not stop the worker
            failed[module_name] = "%s: %s" % (type(exc).__name__, exc)
    seccomp = False
    if config.get("seccomp_bpf"):
        try:
            _load_seccomp(config["seccomp_bpf"])
            seccomp = True
        except OSError as exc:
            if config.get("seccomp_required"):
                _send(out_fd, {"error": "cannot load seccomp filter: %s" % exc})
                return
    # Private tmpfs the launcher mounted for us (process backend): wiped after every job.
    private_dirs = os.environ.pop("SANDBOX_PRIVATE_DIRS", "")
    config["scratch_dirs"] = list(config.get("scratch_dirs") or []) + [d for d in private_dirs.split(":") if d]
    worker = Worker(config, in_fd, out_fd)
    _send(
        out_fd,
        {
            "ready": True,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "preloaded": preloaded,
            "preload_failed": failed,
            "seccomp": seccomp,
            "subreaper": subreaper,
            "work_dir": work_dir,
        },
    )
    # From here on the host no longer reads our stderr.
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    try:
        worker.serve()
    finally:
        worker.kill_leftovers(deadline_s=2.0)
        if not config.get("work_dir_is_private"):
            _rmtree(work_dir)


if __name__ == "__main__":
    main()
