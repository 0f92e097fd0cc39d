"""The warm worker: a Python process that lives *inside* the sandbox and runs one job per fork.

This file is not imported by the host. Its source text is handed to a fresh interpreter as
``python -I -S -B -c <source>`` inside the sandbox, so it must use the standard library only and
must not rely on the ``sandboxes`` package being importable there.

Protocol (length-prefixed JSON frames, 4-byte big-endian length):
    host -> worker: config frame, then job frames (each with an ``id``; files as hex in
    ``files``, and by name in ``stored_files`` once the host has sent them with ``keep_files``:
    the worker keeps such a file's content and writes it into every job that names it; a kept
    file the frame also lists in ``hold_files`` (the host's *shared code*) is run once by the
    zygote as a module's body, and every job given it finds that module in
    ``sys.modules["_sandbox_shared_code"].modules``)
    worker -> host: ready frame, then per job ``{"accepted": id}`` and one result frame
The worker reads frames on the descriptor that was its stdin and writes on the one that was its
stdout; both are moved to high numbers and never reach a job.

Two processes serve jobs:

* the **worker** talks to the host, writes each job's files, supervises the run (output caps,
  deadline, memory accounting), kills what the run left and wipes every writable directory;
* the **zygote**, forked from the worker right after the preload and before any job, does
  nothing but fork job processes and, when the worker asks, run a shared code file's body once
  (the host's own public code, which it declared: a harness driver). It never sees a program,
  its input or its output, so a job (a copy of the zygote's memory) cannot read what earlier
  runs left in memory.

Both are non-dumpable (so ``/proc/<pid>/mem``, ptrace, ``process_vm_readv`` and ``pidfd_getfd``
cannot reach them even from the same uid), the worker ignores every signal it can, and, where
the host gives them a range of uids (root), each job runs under a uid of its own that no other
live process has. The zygote loads a second, stricter seccomp filter (built on the host, with
the worker's and its own pid patched in) that every job process inherits.

Per job:
    1. the worker writes ``main.py`` and the job's files into a fresh directory with an
       unguessable name, owned by the job's uid;
    2. the zygote sets what the job starts from and depends only on its directory (``HOME``,
       ``TMPDIR``, ``sys.argv``, ``sys.path[0]``, ``__main__.__file__``, fresh seeds) and forks
       the job process, which starts a new session, takes the job's stdin/stdout/stderr, drops
       to the job's uid, sets rlimits (address space on top of the zygote's own, CPU,
       processes, file size, open files, no core files) and executes the source in its copy of
       the zygote's pristine ``__main__``;
    3. the worker reads stdout/stderr up to the cap, enforces the wall-clock deadline and the
       run's memory budget (all its processes plus the bytes it stores in the sandbox's
       private file systems) until the zygote reports it has reaped the job process, and on
       exit, timeout, overflow or overspend kills *every* process the run left behind;
    4. the worker removes the job directory and wipes ``/tmp``, ``/dev/shm`` and the rest of the
       work area, so nothing a run wrote is seen by the next.
"""

import atexit
import ctypes
import gc
import io
import json
import marshal
import math
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys
import time
import traceback
import types

_HEADER = struct.Struct(">I")
# What the zygote tells the worker: (pid, wait status) of a job process once it has reaped it
# (-1, -1 for a request it refused), and (0, 0) when it is ready and after it holds shared code
# ((0, 1): it could not). A fixed binary record rather than JSON: the zygote writes to as few of
# its pages as it can (while a job lives, every page it writes costs it a copy-on-write fault).
_ZYGOTE_REPORT = struct.Struct("=ii")
# What the worker asks the zygote for: the job's uid (-1: keep the zygote's), its rlimits in the
# order of `_JOB_RLIMITS`, then the job directory's path; with the job's stdin, stdout and stderr
# attached. Fixed binary fields for the same reason, and because the job process decodes them
# itself: the zygote only forks.
_JOB_REQUEST = struct.Struct("=i6q")
# The first bytes of a shared code file (sandboxes/core.py: SHARED_CODE_MAGIC): a kept file that
# starts so, with this interpreter's cache tag, is unmarshalled and run once by the zygote.
_SHARED_CODE_MAGIC = b"#sandbox-shared-code "
_SHARED_CODE_HEADER = _SHARED_CODE_MAGIC + (sys.implementation.cache_tag or "none").encode("ascii") + b"\n"
# The zygote's request to hold a shared code file (with the file as a memfd): this byte, then
# the file's id.
_HOLD_CODE = b"C"
# The longest request the zygote reads (it allocates this much per request).
_REQUEST_BYTES = 4096
_JOB_RLIMITS = (
    resource.RLIMIT_CPU,
    resource.RLIMIT_AS,
    resource.RLIMIT_NPROC,
    resource.RLIMIT_FSIZE,
    resource.RLIMIT_NOFILE,
    resource.RLIMIT_CORE,
)
_MIB = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE")
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# Job filter placeholders (sandboxes/seccomp.py: JOB_PLACEHOLDERS).
_PLACEHOLDER_WORKER = 0x5EC00001
_PLACEHOLDER_ZYGOTE = 0x5EC00002
_PLACEHOLDER_WORKER_GROUP = 0x5EC00003
# How often a running job's memory is measured, after the first measurement.
_MEMORY_POLL_S = 0.01
# What one file costs in kernel memory on a tmpfs (inode and dentry), for the memory accounting.
_INODE_BYTES = 1024
# What a pipe or a socket a run holds open may pin in kernel buffers, charged to its memory
# budget whether or not it is full (the job filter keeps a run from growing them): a pipe's
# default capacity, and a socket's default send plus receive buffers (read from the host).
_PIPE_BYTES = 65536


def _output_channel():
    """A run's stdout or stderr: ``(the worker's end, the run's end)`` of a Unix stream socket
    pair, as descriptors. Not a pipe: a run that shares the worker's uid (a sandbox started
    without root) could open ``/proc/self/fd/1`` for reading and take out of the pipe what the
    run's other processes wrote before the worker read it (the function harness's records, and
    with them their secret, then write its own); ``/proc`` cannot reopen a socket (ENXIO), and
    what one end writes only the other end reads. The run's end may hold at most its send
    buffer, set here at a pipe's capacity (the job filter keeps a run from changing it); one
    ``write()`` under PIPE_BUF still reaches the worker whole, as on a pipe. The worker's end
    never writes (the run reads EOF from its stdout), is non-blocking, and reads out-of-band data
    inline: a ``MSG_OOB`` byte made ``select`` say readable while a plain ``read`` skipped it and
    waited, and the worker stopped enforcing the run's time and memory limits."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _PIPE_BYTES)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)
    ours.shutdown(socket.SHUT_WR)
    ours.setblocking(False)
    return ours.detach(), theirs.detach()


def _read_available(fd):
    """What the run's output channel ``fd`` holds now (``b""`` at its end, ``None`` when nothing
    is there yet): the worker's end is non-blocking, so no read can stall the supervision."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None


def _send_buffer(fd):
    """What the run's end ``fd`` of an output channel can hold (the kernel doubles the size set)."""
    probe = socket.socket(fileno=os.dup(fd))
    try:
        return probe.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    finally:
        probe.close()


def _socket_bytes():
    total = 0
    for name in ("wmem_default", "rmem_default"):
        try:
            with open("/proc/sys/net/core/" + name) as fh:
                total += int(fh.read())
        except (OSError, ValueError):
            total += 212992  # Linux's default for each
    return total
# Signals a job could otherwise use against a worker that shares its uid (SIGKILL and SIGSTOP
# cannot be ignored: pid 1 of a namespace is immune to them from inside; elsewhere the job filter
# or the uid denies them).
_IGNORED_SIGNALS = (
    "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM",
    "SIGPROF", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGPIPE", "SIGXFSZ", "SIGXCPU", "SIGWINCH",
    "SIGIO", "SIGPWR", "SIGTRAP", "SIGURG",
)  # fmt: skip

_IGNORED_NUMBERS = tuple(
    getattr(signal, name) for name in _IGNORED_SIGNALS if hasattr(signal, name) and name not in ("SIGPIPE", "SIGXFSZ")
)

_libc = ctypes.CDLL(None, use_errno=True)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
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


class _Filter:
    """A seccomp filter ready to load (its buffers built once)."""

    def __init__(self, program):
        self.buffer = ctypes.create_string_buffer(program, len(program))
        self.fprog = _SockFprog(len(program) // 8, ctypes.cast(self.buffer, ctypes.c_void_p))

    def load(self, set_no_new_privs=True):
        """Install on this process and all its future children (``no_new_privs`` must be set
        first; it is inherited, so a process under a filter already has it)."""
        if set_no_new_privs and _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self.fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def _load_seccomp(program):
    """Install a seccomp filter (raw BPF) on this process and all its future children."""
    _Filter(program).load()


def _patch_job_filter(program, worker_pid, zygote_pid, worker_group):
    values = {
        _PLACEHOLDER_WORKER: worker_pid,
        _PLACEHOLDER_ZYGOTE: zygote_pid,
        _PLACEHOLDER_WORKER_GROUP: (-worker_group) & 0xFFFFFFFF,
    }
    out = bytearray(program)
    for offset in range(0, len(out), 8):
        (k,) = struct.unpack_from("<I", out, offset + 4)
        if k in values:
            struct.pack_into("<I", out, offset + 4, values[k])
    return bytes(out)


_CAP_HEADER = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
_CAP_NONE = (_CapData * 2)()


def _has_capabilities():
    with open("/proc/self/status") as fh:
        return any(line.startswith("CapEff:") and int(line.split()[1], 16) for line in fh)


def _drop_capabilities():
    """Empty every capability set (a job never needs one; its uid may still be 0 somewhere)."""
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if _libc.capset(ctypes.byref(_CAP_HEADER), _CAP_NONE) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _protect_self():
    """No ptrace, /proc/<pid>/mem, process_vm_* or pidfd_getfd on us; ignore catchable signals."""
    if _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")
    for name in _IGNORED_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, signal.SIG_IGN)


def _become_subreaper():
    return _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _read_proc(path):
    """The whole content of a small (``/proc``) file, read with plain system calls (no file
    object: the worker reads a few of these per run). Raises OSError if it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _memory_status(pid):
    """(address space, resident anonymous, resident shared memory) bytes of `pid`, or None if
    it is gone. Shared memory (``RssShmem``) is what the process maps of shared anonymous
    mappings, memfds and tmpfs files: pages that outlive a private allocation's accounting."""
    try:
        text = _read_proc("/proc/%d/status" % pid)
    except OSError:
        return None
    values = {}
    for line in text.split(b"\n"):
        if line.startswith((b"VmSize:", b"RssAnon:", b"RssShmem:")):
            name, value = line.split(b":", 1)
            values[name] = int(value.split()[0]) * 1024
    if b"VmSize" not in values:
        return None  # a zombie: nothing held
    return values[b"VmSize"], values.get(b"RssAnon", 0), values.get(b"RssShmem", 0)


def _in_memory_device():
    """The device of the kernel's internal shared-memory file system, which holds memfds and
    shared anonymous mappings (files no directory shows, so no ``statvfs`` counts them)."""
    try:
        fd = os.memfd_create("probe", 0)
    except (AttributeError, OSError):
        return None
    try:
        return os.fstat(fd).st_dev
    finally:
        os.close(fd)


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
                stat_line = fh.read()
        except OSError:
            continue
        # Field 4 (ppid) follows the command name, which may itself contain ') '.
        fields = stat_line[stat_line.rfind(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    found, frontier = [], [root_pid]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            found.append(child)
            frontier.append(child)
    return found


def _remove(path):
    """Remove a file, symlink or whole tree without following links, even if the program made
    parts of it unreadable. Returns whether it is gone (never raises: a tree too deep or too odd
    to remove only makes the worker unclean, so that it is replaced)."""
    try:
        return _remove_tree(path)
    except Exception:
        return False


def _startup_tree(directories):
    """Every path under ``directories`` now, and those that are mount points (another device
    than their directory's). Mounts are not descended into."""
    paths, mounts = set(), set()
    for top in directories:
        try:
            device = os.lstat(top).st_dev
        except OSError:
            continue
        stack = [top]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as entries:
                    children = [entry.path for entry in entries]
            except OSError:
                continue
            for path in children:
                paths.add(path)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if st.st_dev != device:
                    mounts.add(path)
                elif stat.S_ISDIR(st.st_mode):
                    stack.append(path)
    return paths, mounts


def _remove_tree(top):
    """`_remove` without the safety net. Iterative (a tree may be deeper than Python's recursion
    limit); makes each directory of the tree (and nothing above it) writable before emptying it,
    since the program may have taken its permissions away."""
    try:
        mode = os.lstat(top).st_mode
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(mode):
        try:
            os.unlink(top)
        except OSError:
            pass
        return not os.path.lexists(top)
    stack = [(top, False)]
    while stack:
        directory, emptied = stack.pop()
        if emptied:
            try:
                os.rmdir(directory)
            except OSError:
                pass
            continue
        try:
            os.chmod(directory, 0o700)
        except OSError:
            pass
        stack.append((directory, True))
        try:
            with os.scandir(directory) as entries:
                children = [(entry.path, entry.is_dir(follow_symlinks=False)) for entry in entries]
        except OSError:
            continue
        for path, is_dir in children:
            if is_dir:
                stack.append((path, False))
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass
    return not os.path.lexists(top)


# ---------------------------------------------------------------------------------------------
# zygote and job process
# ---------------------------------------------------------------------------------------------


_HUGE_PAGE = 2 << 20
_MADV_COLLAPSE = 25  # Linux 6.1+
_THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"


def _huge_pages_wanted(host_allows):
    """Whether the zygote may map its memory in huge pages (`_collapse_to_huge_pages`).

    ``MADV_COLLAPSE`` ignores the machine's transparent huge page setting, so the zygote honours
    it here: not where it is ``never`` (an administrator turned huge pages off), read from this
    process's ``/sys`` where it is visible (a container) and otherwise as the host read it:
    `host_allows` is False where the host saw ``never`` or the user set ``SANDBOX_HUGE_PAGES=off``
    (``sandboxes.pool.huge_pages_allowed``)."""
    if host_allows is False:
        return False
    try:
        with open(_THP_SETTING) as setting:
            return "[never]" not in setting.read()
    except OSError:
        return True


def _collapse_to_huge_pages():
    """Map the aligned 2 MiB stretches of this process's heap and anonymous memory as
    transparent huge pages (``MADV_COLLAPSE``); returns the bytes the kernel collapsed.

    A fork copies the page-table entries of every page its parent has written, one per 4 KiB,
    and the child's exit tears them down again: for a zygote of ~12 MiB that is most of the
    fork's cost. A huge page costs one entry, shared until a process writes to it (the writer
    then gets 4 KiB entries for that stretch again), so the stretches a job does not write cost
    it almost nothing (measured side by side: 1–15 % less CPU per trivial run, ~23 % less per
    run of a numpy worker; docs/benchmarks.md, "Sixteenth pass"). Best effort: on a kernel
    without ``MADV_COLLAPSE`` or transparent huge pages, or with none free, nothing changes.
    ``MADV_COLLAPSE`` ignores the machine's setting (``never`` included): the zygote calls this
    only where `_huge_pages_wanted`.
    """
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return 0
    madvise = _libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    for line in lines:
        fields = line.split()
        # Private writable memory without a file: the heap and anonymous mappings.
        if len(fields) < 5 or fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue
        low, high = (int(value, 16) for value in fields[0].split("-"))
        start, end = (low + _HUGE_PAGE - 1) & ~(_HUGE_PAGE - 1), high & ~(_HUGE_PAGE - 1)
        if end > start and madvise(start, end - start, _MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed


def _zygote(sock, worker_pid, worker_group, job_filter, huge_pages=True):
    """Fork one job process per request from the worker; never returns. `huge_pages`: whether it
    may collapse its memory into huge pages once it has built everything (`_huge_pages_wanted`).

    Requests carry only paths, limits and three descriptors (stdin, stdout, stderr), so nothing
    of any program, input or output ever enters this process's memory. The job process starts
    from the request already parsed here (a forked process pays for every page it writes, so it
    should do as little as possible before the program). The zygote tells the worker the job
    process's pid at once, and its exit status once it has reaped it.
    """
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)  # not the host's stderr pipe
    os.close(null)
    # Capabilities a job would keep without a uid of its own (a worker that is uid 0 somewhere);
    # a uid change clears them by itself.
    capable = _has_capabilities()
    streams = _job_streams()
    # What a job replaces (the streams, ``__main__``, ``sys.argv``) stays referenced here, so that
    # a job drops it without freeing it: freeing the worker's module or streams in the job (their
    # finalizers, the garbage collector's lists) cost it ~60 copy-on-write faults per run.
    replaced = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__)
    replaced += (sys.modules.get("__main__"), list(sys.argv))
    # Shared code files the worker asked us to hold (file id -> the module their code defined),
    # and the module through which a job finds those it was given (its file name -> module;
    # filled in the job process, so each job sees only its own).
    held = {}
    shared = types.ModuleType("_sandbox_shared_code")
    shared.modules = {}
    sys.modules["_sandbox_shared_code"] = shared
    if job_filter:
        # Loaded here, once: every job process inherits it (preparing a filter in each job would
        # cost it ~0.3 ms), and nothing the zygote does needs what it denies.
        _Filter(_patch_job_filter(job_filter, worker_pid, os.getpid(), worker_group)).load(set_no_new_privs=False)
    # The signals the worker ignores, back to what a fresh interpreter has, once for every job
    # (SIGPIPE and SIGXFSZ stay ignored, as CPython sets them: a write then fails with EPIPE or
    # EFBIG). The zygote needs no such shield: a job cannot signal it (the uid or the job filter).
    for number in _IGNORED_NUMBERS:
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # What `_prepare_job` points at each job: its directory's slot in the import path (a path no
    # directory has until then), its ``sys.argv`` and its ``__main__``. One module serves every
    # job: each writes to its own copy of it, and the zygote sets only its ``__file__``.
    sys.path.insert(0, os.devnull)
    sys.argv[:] = [os.devnull]
    main_module = types.ModuleType("__main__")
    main_module.__builtins__ = __builtins__
    sys.modules["__main__"] = main_module
    environment = _JobEnvironment()
    gc.collect()
    gc.freeze()  # keep inherited objects' pages shared after each fork
    if huge_pages:
        _collapse_to_huge_pages()  # after the zygote's last big writes: cheaper forks
    pack_report, waitpid, fork, close = _ZYGOTE_REPORT.pack, os.waitpid, _job_fork(), os.close
    recvmsg, fds_space, request_size = sock.recvmsg, socket.CMSG_SPACE(3 * 4), _JOB_REQUEST.size
    sock.sendall(pack_report(0, 0))  # ready: the worker measures what every job starts from
    while True:
        try:
            message, ancillary, _flags, _addr = recvmsg(_REQUEST_BYTES, fds_space)
        except OSError:
            os._exit(0)
        if not message:
            os._exit(0)
        fds = []
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += struct.unpack("=%di" % (len(data) // 4), data[: len(data) - len(data) % 4])
        if len(fds) == 1 and message[:1] == _HOLD_CODE:
            held_now = _hold_code(fds[0], message[1:], held)
            close(fds[0])
            fork = _job_fork()
            gc.freeze()  # the new objects too: a job's collections must not write their pages
            sock.sendall(pack_report(0, 0 if held_now else 1))
            continue
        if len(fds) != 3 or len(message) <= request_size:
            for fd in fds:
                close(fd)
            sock.sendall(pack_report(-1, -1))  # the worker gives up on this zygote
            continue
        job = _prepare_job(message, held, shared.modules, main_module, environment)
        pid = fork()
        if pid == 0:
            # The zygote's socket is closed with every other inherited descriptor in the job.
            _job_process(job, fds, capable, streams)
            del replaced  # never reached (the job exits); keeps `replaced` alive until here
        # Nothing but the wait until the job has exited: while it lives, every page this process
        # writes costs it a copy. The worker learns of the exit from the report (it needs no pid
        # before: it kills a run by its processes, all of them but this one).
        status = -1
        while True:
            try:
                status = waitpid(pid, 0)[1]
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
        for fd in fds:
            close(fd)
        sock.sendall(pack_report(pid, status))


def _job_fork():
    """How the zygote forks a job: libc's ``fork`` called with the GIL held, or ``os.fork``
    where libc cannot be loaded so, the zygote has more than one thread, or the interpreter
    runs without a GIL.

    ``os.fork`` also runs CPython's work around a fork: the at-fork hooks (``random`` reseeds
    itself, ``threading`` and ``logging`` make their locks anew) and the re-initialisation of
    the runtime's locks and of the thread states other threads may have held. The zygote has
    one thread (a fork copies only the thread that forks, and the zygote starts none) and holds
    no lock between forks, so all of that finds nothing to repair; the zygote seeds ``random``
    (and numpy's) afresh for every job (`_prepare_job`). Skipping it saves every job ~8 of its
    ~300 copy-on-write faults (docs/benchmarks.md, "Seventeenth pass"). libc's own at-fork
    handlers (C libraries' locks, OpenSSL's random state) run either way. Checked again after the zygote runs shared
    code (`_hold_code`), the one other thing it runs."""
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        return os.fork  # a free-threaded build: its runtime's own after-fork work is not skipped
    try:
        if len(os.listdir("/proc/self/task")) != 1:
            return os.fork
        bare = ctypes.PyDLL(None, use_errno=True).fork
    except (AttributeError, OSError):
        return os.fork
    bare.restype = ctypes.c_int
    bare.argtypes = []

    def fork():
        pid = bare()
        if pid < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
        return pid

    return fork


def _hold_code(fd, file_id, held):
    """Run the shared code file open on `fd` as the body of a module, `held[file_id]`. Returns
    whether it is held: not if it is not a shared code file for this interpreter, not a code
    object, or its body raised. Its content comes from the host (the caller's own code, sent
    once with ``keep_files``); its body only defines names (a harness driver's functions and
    classes): running it here rather than in every job saved each function-test run ~1.8 ms
    and ~360 copy-on-write faults (the driver's classes and functions built after the fork)."""
    try:
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        if not data.startswith(_SHARED_CODE_HEADER):
            return False
        code = marshal.loads(memoryview(data)[len(_SHARED_CODE_HEADER):])
        if type(code) is not types.CodeType:
            return False
        module = types.ModuleType("_sandbox_shared_" + file_id.decode("ascii", "replace"))
        module.__builtins__ = __builtins__
        exec(code, module.__dict__)
        held[file_id] = module
        return True
    except BaseException:
        return False


def _job_streams():
    """The text streams a job's program gets as ``sys.stdin``, ``sys.stdout`` and ``sys.stderr``,
    built once by the zygote on descriptors 0, 1 and 2 and inherited, empty, by every job.

    Building them in each job cost it ~100 copy-on-write faults (the codec machinery and the
    three buffers touched for the first time after the fork), a fifth of a trivial run's. They
    are built on descriptors of the kinds a job gets (a memfd for stdin, sockets for stdout and
    stderr: :func:`_output_channel`), so what they cache about their descriptor (seekable or not, position, block size)
    is what a job's own would have; the zygote then points 0, 1 and 2 back at /dev/null and never
    reads or writes through them. Nothing of a program ever enters them in the zygote."""
    null = os.open(os.devnull, os.O_RDWR)
    stdin_fd = os.memfd_create("stdin", 0)
    out_r, out_w = _output_channel()
    try:
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        streams = (
            io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="strict"),
            io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="strict"),
            io.TextIOWrapper(
                io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                encoding="utf-8",
                errors="backslashreplace",
                line_buffering=True,
            ),
        )
    finally:
        for target in (0, 1, 2):
            os.dup2(null, target)
        for fd in (null, stdin_fd, out_r, out_w):
            os.close(fd)
    return streams


class _JobEnvironment:
    """``HOME`` and ``TMPDIR`` of each job, set by the zygote in two buffers of its own.

    ``os.environ[name] = value`` calls C's ``setenv``, which allocates a new ``NAME=value``
    string for every value and keeps each one for good in a search tree (it cannot know whether
    the old string is still referenced): in the zygote, two strings per job that were never
    freed (~160 bytes a job) and ~15 page faults a job, walking and rebalancing that tree.
    Here the C environment is handed one buffer per name, once (``putenv`` keeps the pointer it
    is given, not a copy); each job's value is written into it in place, and ``os.environ``'s
    own mapping (which a job's ``os.environ`` and ``os.getenv`` read; C's ``environ``, which a
    subprocess inherits, points at the buffers) is updated to match. A value longer than a
    buffer, or an interpreter whose ``os.environ`` is not built so, falls back to ``setenv``
    through ``os.environ``, for good."""

    _NAMES = ("HOME", "TMPDIR")
    _VALUE_BYTES = 4096  # PATH_MAX

    def __init__(self):
        # (buffer, b"NAME=", b"NAME"): never dropped, since C's environment may point at them
        # (even after a fallback: a job's copy of the environment array may still).
        self.buffers = []
        self.in_place = False
        self.data = getattr(os.environ, "_data", None)
        self.encoding = sys.getfilesystemencoding()
        if type(self.data) is not dict:
            return
        try:
            for name in self._NAMES:
                key = name.encode(self.encoding)
                buffer = ctypes.create_string_buffer(len(key) + 1 + self._VALUE_BYTES + 1)
                buffer.value = key + b"=" + self.data.get(key, b"")
                self.buffers.append((buffer, key + b"=", key))
                if _libc.putenv(buffer) != 0:
                    return
        except (OSError, ValueError):
            return
        self.in_place = True

    def set(self, value):
        """Every name of `_NAMES` to `value` (a path, as bytes, without a NUL: the request's
        fields are separated by NULs)."""
        if not self.in_place or len(value) > self._VALUE_BYTES:
            self.in_place = False  # setenv replaces the pointers: the buffers are no longer read
            for name in self._NAMES:
                os.environb[name.encode(self.encoding)] = value
            return
        for buffer, prefix, key in self.buffers:
            buffer.value = prefix + value
            self.data[key] = value


def _prepare_job(request, held, shared_modules, main_module, environment):
    """In the zygote, before it forks a job: set up what the job's process starts from and that
    depends only on its request (not on its program, input or output, which never enter the
    zygote), and return (uid, rlimits, job directory, path of ``main.py``).

    ``HOME`` and ``TMPDIR``, ``sys.argv``, ``sys.path[0]``, ``__main__.__file__`` (`main_module`,
    the zygote's one ``__main__``: each job runs in its own copy), the shared code modules the
    job was given, and fresh seeds for ``random`` and numpy's generator. The previous job has
    been reaped by now, so the zygote's pages are its own again: writing them costs it a fault
    that only makes the page writable, where the same writes in the forked job cost a fault that
    copies the page, and the job's exit frees the copy (docs/benchmarks.md, "Eighteenth pass").
    `request`: a `_JOB_REQUEST` record, the job directory and, after a NUL, NUL-separated pairs
    of file name and id of the shared code files this job was given; `held`: the shared code
    the zygote holds (id -> module), of which this job's go into `shared_modules` (name ->
    module), and only they; `environment`: the zygote's `_JobEnvironment`."""
    uid, *rlimits = _JOB_REQUEST.unpack_from(request)
    job_dir_bytes, _, given = request[_JOB_REQUEST.size:].partition(b"\0")
    job_dir = job_dir_bytes.decode("utf-8", "surrogateescape")
    main_path = job_dir + "/main.py"
    shared_modules.clear()
    if given:
        pairs = given.split(b"\0")
        for name, file_id in zip(pairs[0::2], pairs[1::2]):
            module = held.get(file_id)
            if module is not None:
                shared_modules[name.decode("utf-8", "surrogateescape")] = module
    if atexit._ncallbacks():
        atexit._clear()  # the worker's exit handlers, or shared code's, are not the program's
    environment.set(job_dir_bytes)
    main_module.__file__ = main_path
    sys.argv[0] = main_path
    sys.path[0] = job_dir
    # A fresh interpreter seeds its generators from the OS; every job gets its own seeds here,
    # so that no two forks of this zygote share them.
    if "random" in sys.modules:
        sys.modules["random"].seed()
    numpy_random = sys.modules.get("numpy.random")  # only if loaded: importing it costs ~20 ms
    if numpy_random is not None:
        try:
            # An explicit seed: numpy's own entropy gathering costs ~30 ms on first use.
            numpy_random.seed(int.from_bytes(os.urandom(4), "little"))
        except Exception:
            pass
    return uid, rlimits, job_dir, main_path


def _job_process(job, fds, capable, streams):
    """The forked job: take the job's descriptors, identity and limits, then run it; never returns.
    `job`: what `_prepare_job` returned for it; `streams`: the program's stdin, stdout and
    stderr, built by the zygote (`_job_streams`)."""
    status = 1
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 1 << 20)  # nothing of the worker's: protocol pipes, zygote socket
        uid, rlimits, job_dir, main_path = job
        if uid >= 0:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)  # clears every capability that could be used
        elif capable:
            _drop_capabilities()
        # A process's /proc files belong to root while it is not dumpable (inherited from the
        # zygote; a uid change also clears it): the program could not open its own.
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.chdir(job_dir)
        for which, value in zip(_JOB_RLIMITS, rlimits):
            resource.setrlimit(which, (value, value))
        # Read as ``python main.py`` would see it (UTF-8, universal newlines), without the
        # three-layer file object ``open`` builds: every object the job creates or touches
        # before the program costs it copy-on-write faults.
        # Read in reads of the file's own size (+1 to see its end): a fixed 1 MiB buffer cost
        # every run an mmap, a first-touch fault, an mremap and an munmap for a few bytes.
        fd = os.open(main_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = []
            size = os.fstat(fd).st_size + 1
            while True:
                chunk = os.read(fd, size)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(fd)
        source = b"".join(chunks).decode("utf-8", "surrogatepass").replace("\r\n", "\n").replace("\r", "\n")
        sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
        status = _run_program(source, main_path)
    except BaseException:  # the child must never fall back into the zygote loop
        try:
            os.write(2, b"sandbox: failed to start the program\n")
        except OSError:
            pass
        status = 1
    os._exit(status)


# ---------------------------------------------------------------------------------------------
# worker
# ---------------------------------------------------------------------------------------------


class ZygoteLost(Exception):
    """The zygote died or stopped answering: this worker can no longer run jobs."""


class Worker:
    def __init__(self, config, in_fd, out_fd):
        self.config = config
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.work_root = config["work_dir"]
        self.private_view = bool(config.get("work_dir_is_private"))
        scratch = list(config.get("scratch_dirs", ()))
        if self.private_view and os.path.isdir("/dev/shm") and "/dev/shm" not in scratch:
            scratch.append("/dev/shm")  # the sandbox's own (docker's and bwrap's are private)
        self.scratch_dirs = scratch
        self.scratch_keep = set(config.get("scratch_keep", ()))
        # What the scratch directories hold before any job: the scaffolding of read-only binds
        # (a checkout or virtual environment under /tmp is bound back into the private /tmp)
        # and the binds themselves. The wipe keeps them and empties everything else.
        self.startup_paths, self.mount_points = _startup_tree(scratch)
        # Writable file systems whose bytes count against a run's memory budget.
        self.accounted_dirs = ([self.work_root] if self.private_view else []) + scratch
        run_uids = config.get("run_uids")
        self.run_uids = tuple(run_uids) if run_uids else None
        self.job_counter = 0
        self.pid = os.getpid()
        self.children_path = "/proc/%d/task/%d/children" % (self.pid, self.pid)
        self.is_pid1 = self.pid == 1
        try:
            os.setsid()  # own process group: the job filter forbids signalling it
        except OSError:
            pass
        self.group = os.getpgid(0)
        self.zygote_pid = None
        self.zygote_pid_bytes = b""
        self.zygote_sock = None
        self.zygote_vm = 0
        self.zygote_anon = 0
        self.zygote_shmem = 0
        self.shm_device = _in_memory_device()
        self.socket_bytes = _socket_bytes()
        self.job_input_inode = None  # the job's stdin memfd: the caller's input, not the run's memory
        self.job_output_bytes = {}  # (device, inode) of the job's stdout and stderr -> what each can hold
        self.stored_files = {}  # file id -> content the host asked us to keep ("keep_files")
        self.held_code = set()  # ids of the stored files the zygote holds (run as modules)
        self.idle_tmpfs = None
        self.broken = None

    # -- zygote --------------------------------------------------------------------------------
    def start_zygote(self, job_filter):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                for fd in (self.in_fd, self.out_fd):
                    os.close(fd)
                _zygote(theirs, self.pid, self.group, job_filter, _huge_pages_wanted(self.config.get("huge_pages")))
            finally:
                os._exit(70)
        theirs.close()
        self.zygote_pid = pid
        self.zygote_pid_bytes = str(pid).encode()
        self.zygote_sock = ours
        try:
            if self._zygote_report(60.0) != (0, 0):
                raise ZygoteLost("the zygote sent a report before it was ready")
            # Once it has built everything (its huge pages fill the holes of what it collapsed).
            self._measure_zygote(now=True)
        except ZygoteLost as exc:
            self.broken = str(exc)  # the first job reports it

    def _zygote_report(self, timeout_s=None):
        """The zygote's next report (`_ZYGOTE_REPORT`): (pid, wait status, or None where it could
        not wait for the process). `timeout_s`: how long to wait for it (None: it is there)."""
        if timeout_s is not None and not select.select([self.zygote_sock], [], [], timeout_s)[0]:
            raise ZygoteLost("the zygote did not answer within %gs" % timeout_s)
        data = self.zygote_sock.recv(64)
        if not data:
            raise ZygoteLost("the zygote exited")
        if len(data) != _ZYGOTE_REPORT.size:
            raise ZygoteLost("the zygote sent a malformed report")
        pid, status = _ZYGOTE_REPORT.unpack(data)
        return pid, (None if status == -1 else status)

    def _measure_zygote(self, now=False):
        """The zygote's address space and anonymous memory: what every job starts from. They
        barely move, so they are read again only every 32 jobs (`now`: this time too)."""
        if self.zygote_vm and self.job_counter % 32 and not now:
            return
        sizes = _memory_status(self.zygote_pid)
        if sizes is None:
            raise ZygoteLost("the zygote is gone")
        self.zygote_vm, self.zygote_anon, self.zygote_shmem = sizes

    # -- the run's processes -------------------------------------------------------------------
    def run_pids(self):
        """Every process of the current run (everything but the worker and the zygote)."""
        if self.is_pid1:
            found = []
            for name in os.listdir("/proc"):
                if name.isdigit():
                    pid = int(name)
                    if pid != 1 and pid != self.zygote_pid:
                        found.append(pid)
            return found
        return [pid for pid in _descendants(self.pid) if pid != self.zygote_pid]

    def _only_child_is_the_zygote(self):
        """Whether nothing of the last run is left: once the job process is gone, every process
        it left has been reparented to us (pid 1 or subreaper), so our children tell."""
        try:
            return _read_proc(self.children_path).split() == [self.zygote_pid_bytes]
        except OSError:
            return False  # no such file (CONFIG_PROC_CHILDREN off): sweep /proc

    def kill_leftovers(self, deadline_s=10.0):
        """Kill and reap every process the job left. Returns (processes killed, all gone?)."""
        if self._only_child_is_the_zygote():
            return 0, True
        killed = 0
        give_up = time.monotonic() + deadline_s
        while True:
            alive = False
            signalled = []
            for pid in self.run_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                    alive = True
                    signalled.append(pid)
                except ProcessLookupError:
                    pass
                except PermissionError:
                    alive = True
            reaped_any = False
            while True:  # orphans are ours to reap (pid 1 or subreaper)
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid == self.zygote_pid:
                    self.broken = "the zygote died"
                    continue
                killed += 1
                reaped_any = True
            if not alive and not reaped_any:
                return killed, True
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                return killed, False
            if not reaped_any:
                self._wait_for_an_exit(signalled, remaining)

    @staticmethod
    def _wait_for_an_exit(pids, timeout_s):
        """Wait until one of `pids` has exited (its pidfd turns readable), for at most 10 ms and
        `timeout_s`. A fixed 1 ms sleep here cost each run that left processes (the function-test
        harness's solution processes) a millisecond of wall time; a SIGKILLed process is
        usually gone in tens of microseconds."""
        fds = []
        watchable = True
        try:
            for pid in pids:
                try:
                    fds.append(os.pidfd_open(pid))
                except ProcessLookupError:  # gone already: look again at once
                    return
                except OSError:  # cannot watch it: poll as before
                    watchable = False
                    break
            if fds and watchable:
                select.select(fds, [], [], min(timeout_s, 0.01))
            else:
                time.sleep(min(timeout_s, 0.001))
        finally:
            for fd in fds:
                os.close(fd)

    def run_memory(self, tmpfs_base):
        """Bytes the run holds now: the anonymous and shared memory its processes added, the
        in-memory files they hold open without mapping them (memfds), plus its files.

        Conservative where it cannot be exact: shared pages mapped by several of the run's
        processes count once per process, and a memfd both mapped and held open counts twice.
        """
        total = 0
        held = {}
        for pid in self.run_pids():
            sizes = _memory_status(pid)
            if sizes is None:
                continue
            vm, anon, shmem = sizes
            # A process forked from the zygote shares (up to) the zygote's pages; a freshly
            # executed one does not (its address space is then far smaller).
            forked = vm >= self.zygote_vm
            total += anon - (min(anon, self.zygote_anon) if forked else 0)
            total += shmem - (min(shmem, self.zygote_shmem) if forked else 0)
            self._held_in_memory_files(pid, held)
        return total + sum(held.values()) + max(0, self.tmpfs_used() - tmpfs_base)

    def _held_in_memory_files(self, pid, held):
        """Add to `held` ((device, inode) -> bytes) the memfds and other in-memory files `pid`
        holds open, and the kernel buffers of its pipes and sockets (at their default size)."""
        try:
            entries = os.scandir("/proc/%d/fd" % pid)
        except OSError:
            return
        with entries:
            for entry in entries:
                try:
                    st = entry.stat()  # follows the link: the open file itself
                except OSError:
                    continue
                kind = stat.S_IFMT(st.st_mode)
                if kind == stat.S_IFSOCK:
                    key = (st.st_dev, st.st_ino)
                    held[key] = self.job_output_bytes.get(key, self.socket_bytes)
                elif kind == stat.S_IFIFO:
                    held[(st.st_dev, st.st_ino)] = _PIPE_BYTES
                elif st.st_dev == self.shm_device and st.st_ino != self.job_input_inode:
                    held[(st.st_dev, st.st_ino)] = st.st_blocks * 512

    def tmpfs_used(self):
        used, seen = 0, set()
        for path in self.accounted_dirs:
            try:
                st = os.statvfs(path)
                device = os.stat(path).st_dev
            except OSError:
                continue
            if device in seen:
                continue
            seen.add(device)
            # Data blocks, and inodes at what an inode and its dentry cost the kernel (~1 KiB):
            # a million empty files are memory too.
            used += (st.f_blocks - st.f_bfree) * st.f_frsize + (st.f_files - st.f_ffree) * _INODE_BYTES
        return used

    # -- one job -------------------------------------------------------------------------------
    def _next_uid(self):
        if not self.run_uids:
            return None
        first, count = self.run_uids
        return first + (self.job_counter % count)

    def _write_job_files(self, job, job_dir, uid):
        os.mkdir(job_dir, 0o700)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        entries = [("main.py", job["source"].encode("utf-8", "surrogatepass"))]
        entries += [(name, bytes.fromhex(content)) for name, content in job.get("files", {}).items()]
        # Files the host sends once and then names (a harness's driver): kept in this
        # process, which no run can reach, and written afresh into every job's directory.
        keep = job.get("keep_files")
        shared = []  # (name, id) of this job's files the zygote holds as code
        if keep:
            hold = job.get("hold_files", ())
            for name, content in entries:
                if name in keep:
                    file_id = keep[name]
                    self.stored_files[file_id] = content
                    if name in hold and content.startswith(_SHARED_CODE_HEADER) and self._hold_in_zygote(file_id, content):
                        shared.append((name, file_id))
        for name, file_id in job.get("stored_files", {}).items():
            content = self.stored_files.get(file_id)
            if content is None:
                raise KeyError("the host named a file this worker does not hold: %r" % file_id)
            entries.append((name, content))
            if file_id in self.held_code:
                shared.append((name, file_id))
        made = [job_dir]
        for name, content in entries:
            path = os.path.join(job_dir, name)
            parent = os.path.dirname(path)
            if parent != job_dir and not os.path.isdir(parent):
                os.makedirs(parent, exist_ok=True)
                walk = parent
                while walk != job_dir:
                    made.append(walk)
                    walk = os.path.dirname(walk)
            fd = os.open(path, flags, 0o644)
            try:
                view = memoryview(content)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            made.append(path)
        if uid is not None:
            for path in made:
                os.chown(path, uid, uid, follow_symlinks=False)
        # What they take on the work area's file system, roughly as tmpfs_used() counts it.
        page = _PAGE
        size = sum(-(-len(content) // page) * page for _, content in entries) + len(made) * (_INODE_BYTES + page)
        return size, shared

    def _hold_in_zygote(self, file_id, content):
        """Have the zygote run a shared code file once as a module's body (`_hold_code`), so that
        jobs given the file find that module ready. Returns whether the zygote holds it."""
        if file_id in self.held_code:
            return True
        fd = os.memfd_create("code", 0)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view):]
            socket.send_fds(self.zygote_sock, [_HOLD_CODE + file_id.encode("ascii")], [fd])
        finally:
            os.close(fd)
        pid, status = self._zygote_report(10.0)
        if pid != 0:
            raise ZygoteLost("the zygote answered a request to hold code with a fork report")
        self.zygote_vm = 0  # it grew: measure it again before the next job
        if status == 0:
            self.held_code.add(file_id)
            return True
        return False

    def run_job(self, job):
        self.job_counter += 1
        if self.broken:
            return {"worker_error": self.broken}
        limits = job["limits"]
        sent = False  # whether the zygote was asked to start it
        report = None  # the zygote's report on its job process, once it has reaped it
        uid = self._next_uid()
        # Unguessable (os.urandom rather than the secrets module, which would bring hashlib and
        # OpenSSL into every worker's memory, and so into the pages every fork copies).
        job_dir = os.path.join(self.work_root, "job-" + os.urandom(8).hex())
        stdin_fd = out_r = err_r = None
        try:
            job_bytes, shared = self._write_job_files(job, job_dir, uid)
            stdin_fd = os.memfd_create("stdin", 0)
            stdin_data = job.get("stdin", "").encode("utf-8", "surrogatepass")
            view = memoryview(stdin_data)
            while view:
                view = view[os.write(stdin_fd, view):]
            os.lseek(stdin_fd, 0, os.SEEK_SET)
            self.job_input_inode = os.fstat(stdin_fd).st_ino
            del stdin_data, view
            out_r, out_w = _output_channel()
            err_r, err_w = _output_channel()
            # Charged at what they can hold (the accounting charges other sockets at the host's
            # default buffers): doubled by the kernel from what _output_channel set.
            self.job_output_bytes = {(os.fstat(fd).st_dev, os.fstat(fd).st_ino): _send_buffer(fd) for fd in (out_w, err_w)}
            self._measure_zygote()
            if uid is not None:
                process_budget = limits["max_processes"]  # a fresh uid: only the run's processes count
            else:
                # The worker, the zygote (and a launcher outside the namespace) share the uid.
                process_budget = limits["max_processes"] + _count_own_processes() + 1
            request = _JOB_REQUEST.pack(
                -1 if uid is None else uid,
                # In the order of _JOB_RLIMITS: CPU (a second line of defence behind the
                # wall-clock limit), the address space on top of what the job inherits from the
                # zygote, processes, file size, open files, no core files.
                int(math.ceil(limits["time_s"])) + 1,
                self.zygote_vm + limits["memory_mb"] * _MIB,
                process_budget,
                limits["file_size_mb"] * _MIB,
                limits["open_files"],
                0,
            ) + job_dir.encode("utf-8", "surrogateescape")
            if shared:
                given = b"\0" + b"\0".join(
                    name.encode("utf-8", "surrogateescape") + b"\0" + file_id.encode("ascii") for name, file_id in shared
                )
                if len(request) + len(given) <= _REQUEST_BYTES:  # else the job reads the files
                    request += given
            # What the run's file systems hold before it starts: the worker's idle state (read
            # after the first wipe) and the job's own files.
            if self.idle_tmpfs is None:
                self.idle_tmpfs = self.tmpfs_used() - job_bytes
            tmpfs_base = self.idle_tmpfs + job_bytes
            start = time.monotonic()
            socket.send_fds(self.zygote_sock, [request], [stdin_fd, out_w, err_w])
            sent = True
            os.close(out_w)
            os.close(err_w)
            os.close(stdin_fd)
            stdin_fd = None
            result, report = self._supervise(start, out_r, err_r, limits, tmpfs_base)
        except ZygoteLost as exc:
            self.broken = str(exc)
            result = {"worker_error": self.broken}
        except (OSError, KeyError) as exc:  # e.g. the job's files do not fit the work area
            result = {"worker_error": "cannot set up the job: %s" % exc}
        finally:
            for fd in (stdin_fd, out_r, err_r):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
        if sent and report is None and not self.broken:
            # Supervising it failed: end the run, and take the zygote's report on it, which the
            # next job must not read as its own.
            try:
                self._kill_run()
                report = self._zygote_report(10.0)
            except (ZygoteLost, OSError) as exc:
                self.broken = str(exc)
        killed, clean = self.kill_leftovers()
        result["leftover_processes"] = killed
        tidy = self.wipe()  # the job directory is an entry of the work root: removed with the rest
        if report is not None and "worker_error" not in result:
            exited = result.pop("exited")
            result.update(_exit_fields(report[1] if exited else None, result))
        result.pop("exited", None)
        if self.broken and "worker_error" not in result:
            result["worker_error"] = self.broken
        result["worker_clean"] = clean and tidy and not self.broken
        return result

    def wipe(self):
        """Empty every directory a run may write (work area with the job's directory, /tmp,
        /dev/shm, ...). Returns whether all of them are empty but for what they held at startup:
        one that exists but cannot be listed (a run sharing the worker's uid took its
        permissions away) is not, and the worker is then replaced."""
        tidy = True
        # The work root is the worker's own (private, or made by it): nothing in it is kept.
        for directory in self.scratch_dirs + [self.work_root]:
            try:
                entries = os.listdir(directory)
            except FileNotFoundError:
                continue  # a scratch directory this sandbox does not have
            except OSError:
                tidy = False
                continue
            for entry in entries:
                path = os.path.join(directory, entry)
                if entry in self.scratch_keep or (self.work_root + "/").startswith(path + "/"):
                    continue
                tidy = self._wipe_entry(path) and tidy
        return tidy

    def _wipe_entry(self, path):
        if path in self.mount_points:
            return True
        if path in self.startup_paths:
            try:
                is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
            except OSError:
                return True
            if is_dir:  # scaffolding: keep it, empty it of anything a run added
                try:
                    entries = os.listdir(path)
                except OSError:
                    return False
                tidy = True
                for entry in entries:
                    tidy = self._wipe_entry(os.path.join(path, entry)) and tidy
                return tidy
        return _remove(path)

    def _supervise(self, start, out_r, err_r, limits, tmpfs_base):
        """Read the job's output up to the cap until it exits (the zygote reports it has reaped
        the job process), enforcing the deadline and the memory budget. Returns the result and
        the zygote's report (`_zygote_report`)."""
        cap = limits["output_bytes"]
        deadline = start + limits["time_s"]
        budget = limits["memory_mb"] * _MIB
        next_poll = start + _MEMORY_POLL_S
        buffers = {out_r: bytearray(), err_r: bytearray()}
        truncated = {out_r: False, err_r: False}
        open_fds = [out_r, err_r]
        timed_out = overflow = overspent = False
        zygote = self.zygote_sock.fileno()
        report = None
        while report is None:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if now >= next_poll:
                if self.run_memory(tmpfs_base) > budget:
                    overspent = True
                    break
                next_poll = now + _MEMORY_POLL_S
            readable, _, _ = select.select(open_fds + [zygote], [], [], max(0.0, min(deadline, next_poll) - now))
            for fd in readable:
                if fd == zygote:
                    continue
                chunk = _read_available(fd)
                if chunk is None:
                    continue
                if not chunk:
                    open_fds.remove(fd)
                    continue
                buffers[fd] += chunk
                if len(buffers[fd]) > cap:
                    truncated[fd] = True
                    overflow = True
            if overflow:
                break
            if zygote in readable:
                report = self._zygote_report()
                if report[0] <= 0:
                    raise ZygoteLost("the zygote could not start the job")
        exited = report is not None
        if exited:
            # Take what is already in the pipes, but do not wait for EOF: a background child may
            # hold them open.
            for fd in open_fds:
                while len(buffers[fd]) <= cap:
                    ready, _, _ = select.select([fd], [], [], 0)
                    if not ready:
                        break
                    chunk = _read_available(fd)
                    if not chunk:
                        break
                    buffers[fd] += chunk
                if len(buffers[fd]) > cap:
                    truncated[fd] = True
        duration = time.monotonic() - start
        if not exited:
            # Time limit, output overflow or memory overspent: kill every process of the run,
            # the job process with them.
            self._kill_run()
            if not select.select([zygote], [], [], 10.0)[0]:
                raise ZygoteLost("a job process outlived SIGKILL for 10 s")
            report = self._zygote_report()
        stdout = bytes(buffers[out_r][:cap])
        stderr = bytes(buffers[err_r][:cap])
        return {
            "stdout": stdout.decode("utf-8", "replace"),
            "stderr": stderr.decode("utf-8", "replace"),
            "stdout_truncated": truncated[out_r],
            "stderr_truncated": truncated[err_r],
            "exited": exited,  # on its own (else killed: no exit code); replaced by the exit fields
            "timed_out": timed_out,
            "oom": overspent,
            "duration_s": duration,
        }, report

    def _kill_run(self):
        """SIGKILL every process of the current run."""
        for pid in self.run_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def serve(self):
        while True:
            job = _recv(self.in_fd)
            if job is None:
                return
            # Acknowledge first: if this worker dies before the ack, the host knows the job never
            # started and can safely give it to another worker.
            job_id = job.get("id")
            _send(self.out_fd, {"accepted": job_id})
            result = self.run_job(job)
            result["id"] = job_id
            _send(self.out_fd, result)
            del job, result


def _exit_fields(status, result):
    """``exit_code`` and ``oom`` of a result from the job process's wait status (None: killed by
    the worker)."""
    if status is None:
        exit_code = None
    elif os.WIFSIGNALED(status):
        exit_code = -os.WTERMSIG(status)
    else:
        exit_code = os.WEXITSTATUS(status)
    tail = result["stderr"].rstrip().rsplit("\n", 1)[-1]
    oom = result["oom"] or (exit_code is not None and exit_code != 0 and tail.startswith("MemoryError"))
    return {"exit_code": exit_code, "oom": oom}


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


def _run_program(source, main_path):
    """Execute the program in ``__main__`` (fresh, `_prepare_job`) and return its exit status, like
    ``python main.py``."""
    module = sys.modules["__main__"]
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
    status = _flush_streams(status)
    # Then, as interpreter shutdown does, the program's globals are finalized (a file object it
    # never flushed, ``open(1, "w")``, writes its buffer now) and the streams flushed again.
    try:
        module.__dict__.clear()
    except BaseException:
        pass
    return _flush_streams(status)


def _flush_streams(status):
    """`status` after flushing ``sys.stdout`` and ``sys.stderr`` (120 where stdout fails, as
    CPython's exit)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is None or stream.closed:  # (skipped, as CPython's exit skips them)
                continue
            stream.flush()
        except BaseException:
            if stream is sys.stdout and status == 0:
                status = 120  # what CPython returns when flushing stdout fails at exit
    for stream in (sys.__stdout__, sys.__stderr__):  # (replaced ones: flushed when finalized)
        if stream is not None and stream is not sys.stdout and stream is not sys.stderr:
            try:
                stream.flush()
            except BaseException:
                pass
    return status


def main():
    # The host sets it for this interpreter's start (sandboxes/local.py), not for programs.
    os.environ.pop("LD_BIND_NOW", None)
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
    if config.get("run_uids"):
        os.chmod(work_dir, 0o711)  # jobs of other uids reach their own directory, list nothing
    try:
        _protect_self()
    except OSError as exc:
        _send(out_fd, {"error": "cannot protect the worker: %s" % exc})
        return
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
            _load_seccomp(bytes.fromhex(config["seccomp_bpf"]))
            seccomp = True
        except OSError as exc:
            if config.get("seccomp_required"):
                _send(out_fd, {"error": "cannot load seccomp filter: %s" % exc})
                return
    job_filter = bytes.fromhex(config["job_seccomp_bpf"]) if seccomp and config.get("job_seccomp_bpf") else None
    # Private tmpfs the launcher mounted for us (process backend): wiped after every job.
    private_dirs = os.environ.pop("SANDBOX_PRIVATE_DIRS", "")
    config["scratch_dirs"] = list(config.get("scratch_dirs") or []) + [d for d in private_dirs.split(":") if d]
    worker = Worker(config, in_fd, out_fd)
    del config
    worker.start_zygote(job_filter)
    _send(
        out_fd,
        {
            "ready": True,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "preloaded": preloaded,
            "preload_failed": failed,
            "seccomp": seccomp,
            "job_seccomp": job_filter is not None,
            "run_uids": list(worker.run_uids) if worker.run_uids else None,
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
        try:
            worker.zygote_sock.close()
        except OSError:
            pass
        worker.kill_leftovers(deadline_s=2.0)
        if worker.zygote_pid:
            try:
                os.kill(worker.zygote_pid, signal.SIGKILL)
                os.waitpid(worker.zygote_pid, 0)
            except OSError:
                pass
        if not worker.private_view:
            _remove(work_dir)


if __name__ == "__main__":
    main()
