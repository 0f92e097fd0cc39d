"""Two small seccomp-BPF filters, assembled by hand so no library (libseccomp) is needed.

Both are built on the host and loaded inside the sandbox (with ``PR_SET_NO_NEW_PRIVS``); filters
stack, so a process obeys every filter it inherited.

**The worker filter** (`build_filter`) is loaded by the warm worker itself, so it binds the
worker, its zygote and every program. It denies:

* sockets of any family but ``AF_UNIX`` (``EACCES``): no network even where no network
  namespace could be created;
* syscalls a program never needs and that widen the kernel attack surface (``EPERM``):
  ptrace, process_vm_readv/writev, kcmp, pidfd_getfd, mount/umount/pivot_root and the new mount
  API, unshare/setns, namespace flags on clone, bpf, perf_event_open, keyrings, kernel modules,
  kexec, reboot, swap, userfaultfd, io_uring;
* ``clone3`` (``ENOSYS``), whose flags live in memory a filter cannot inspect; glibc then falls
  back to ``clone``, whose flags are checked;
* any other syscall ABI (e.g. 32-bit calls on x86-64), which would bypass the numbers above:
  the process is killed.

**The job filter** (`build_job_filter`) is loaded by the worker's zygote, on top of the worker
filter, so that every job process starts under both (loading a filter per job would cost each
run ~0.3 ms). It takes away what only matters once a program shares a uid
with its worker (unprivileged hosts, docker): every way to act on *another* process by its pid,
so a program can neither read, steal from, slow down nor signal its worker:

* ``pidfd_open``, ``pidfd_send_signal``, ``process_madvise``, ``process_mrelease`` (``EPERM``);
* ``prlimit64``, ``sched_setaffinity``, ``sched_setparam``, ``sched_setscheduler``,
  ``sched_setattr``, ``migrate_pages``, ``move_pages`` on any pid but 0 (the caller);
  ``setpriority`` and ``ioprio_set`` on anything but the calling process;
* ``kill``, ``tkill``, ``tgkill``, ``rt_sigqueueinfo`` and ``rt_tgsigqueueinfo`` aimed at the
  worker, its zygote, their process group, or every process (``kill(-1)``). The pids are not
  known on the host: the filter carries placeholders (`JOB_PLACEHOLDERS`) that the worker
  patches in;
* signal redirection, for any target: ``fcntl`` ``F_SETOWN``, ``F_SETOWN_EX`` and ``F_SETSIG``,
  ``ioctl`` ``FIOSETOWN``, ``SIOCSPGRP`` and ``TIOCSPGRP`` (the kernel would send SIGIO, or the
  signal chosen, SIGKILL included, to the owner when I/O happens on the descriptor, checking
  only the setter's uid: a run sharing its worker's uid could kill the zygote through its own
  stdout pipe, which the worker reads);
* growing a kernel buffer past its default (``fcntl`` ``F_SETPIPE_SZ``; ``setsockopt``
  ``SO_SNDBUF``, ``SO_RCVBUF`` and their ``FORCE`` forms): the worker charges every pipe and
  socket a run holds open at its default size;
* memory the worker's accounting could not bound (``EPERM``): ``memfd_create``,
  ``memfd_secret``, ``mmap`` with ``MAP_SHARED|MAP_ANONYMOUS`` or ``MAP_HUGETLB``. Pages of a
  shared anonymous mapping or memfd stay allocated while one page of it is still mapped, and
  no file system statistic counts them. Shared memory between a run's processes goes through
  files in ``/dev/shm`` or ``/tmp`` (``multiprocessing`` does), which are counted. (``/dev/zero``,
  whose shared mappings are the same thing, is ``/dev/null`` in the local backends.)
* ``CLONE_PARENT`` (a child that would belong to the zygote rather than to the program);
* SysV IPC and POSIX message queues (``shmget``, ``msgget``, ``semget``, ``mq_open``): objects that
  would outlive the run inside the worker's IPC namespace. POSIX shared memory and semaphores
  are files in ``/dev/shm``, which is private and wiped after every run.
"""

from __future__ import annotations

import errno
import platform
import struct

# BPF opcodes (linux/filter.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000

_OFFSET_NR = 0
_OFFSET_ARCH = 4
# Low 32 bits of args[i] on little-endian machines (every syscall argument checked here is an
# int or pid_t, which the kernel truncates to 32 bits).
_ARG_LOW = (16, 24, 32, 40, 48, 56)

_AF_UNIX = 1
_CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x02000000
_CLONE_PARENT = 0x00008000
_PRIO_PROCESS = 0
_IOPRIO_WHO_PROCESS = 1

#: Values in the job filter that the worker replaces before loading it (see `patch_job_filter`).
JOB_PLACEHOLDERS = {
    "worker_pid": 0x5EC0_0001,
    "zygote_pid": 0x5EC0_0002,
    "worker_pgrp_negative": 0x5EC0_0003,  # -pgid of the worker, as an unsigned 32-bit value
}

# name -> (x86_64 number, aarch64 number)
_SYSCALLS: dict[str, tuple[int, int]] = {
    "socket": (41, 198),
    "clone": (56, 220),
    "clone3": (435, 435),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "unshare": (272, 97),
    "setns": (308, 268),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    # job filter only
    "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "process_madvise": (440, 440),
    "process_mrelease": (448, 448),
    "shmget": (29, 194),
    "msgget": (68, 186),
    "semget": (64, 190),
    "mq_open": (240, 180),
    "prlimit64": (302, 261),
    "setpriority": (141, 140),
    "ioprio_set": (251, 30),
    "sched_setaffinity": (203, 122),
    "sched_setparam": (142, 118),
    "sched_setscheduler": (144, 119),
    "sched_setattr": (314, 274),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    "fcntl": (72, 25),
    "prctl": (157, 167),
    "mmap": (9, 222),
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "ioctl": (16, 29),
    "setsockopt": (54, 208),
}
_WORKER_DENIED = [
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "unshare", "setns", "bpf", "perf_event_open",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
]  # fmt: skip
_JOB_DENIED = [
    "pidfd_open", "pidfd_send_signal", "process_madvise", "process_mrelease",
    "shmget", "msgget", "semget", "mq_open", "memfd_create", "memfd_secret",
]  # fmt: skip
_SELF_ONLY = ["prlimit64", "sched_setaffinity", "sched_setparam", "sched_setscheduler", "sched_setattr", "migrate_pages", "move_pages"]
_SIGNALS = ["kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"]
# Signal redirection: making the kernel send SIGIO/SIGURG (or any signal chosen with F_SETSIG,
# SIGKILL included) to another process when I/O happens on a descriptor. The owner is checked
# against the *setter's* uid only when the signal is sent, so a run sharing its worker's uid
# could aim it at the zygote through its own stdout pipe, which the worker reads. Denied for
# any target: a program has no use for it that is worth that.
_F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 8, 10, 15
# Kernel buffers the worker's accounting charges at their default size (docs/sandboxes.md): a run
# may not grow them. A pipe stays at 64 KiB (F_SETPIPE_SZ would take it to pipe-max-size), a
# socket at the host's default send and receive buffers (SO_SNDBUF/SO_RCVBUF up to wmem_max and
# rmem_max, 4 MiB each on some hosts: 28 socket pairs held 192 MiB past memory_mb=64). The
# option is denied at every level: only Unix sockets exist in a run, where 7 and 8 mean nothing else.
_F_SETPIPE_SZ = 1031
_SO_SNDBUF, _SO_RCVBUF, _SO_SNDBUFFORCE, _SO_RCVBUFFORCE = 7, 8, 32, 33
_FIOSETOWN, _SIOCSPGRP, _TIOCSPGRP = 0x8901, 0x8902, 0x5410
# prctl(PR_SET_DUMPABLE, 0) stays allowed: the function-test harness needs it (its test and
# solution processes share a uid and must not read each other's memory: docs/sandboxes.md), and
# a non-dumpable run hides nothing from the memory accounting, because the memory it could hide
# behind its descriptors (memfds, shared anonymous mappings) is denied above and below.
# Memory the worker's accounting could not bound: pages of the kernel's internal shared-memory
# file system (shared anonymous mappings, memfds) stay allocated while a single page of them is
# still mapped, and no statvfs counts them; a run unmapping all but one page of each held any
# amount. Without them every page a run shares lives in a file of its tmpfs, which is counted.
# Huge pages are not counted as anonymous memory either.
_MAP_SHARED, _MAP_ANONYMOUS, _MAP_HUGETLB = 0x01, 0x20, 0x40000
_ARCHES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}

_EPERM = _RET_ERRNO | errno.EPERM


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def supported() -> bool:
    """Whether a filter can be built for this machine's architecture."""
    return platform.machine() in _ARCHES


def _numbers(machine: str | None) -> tuple[int, dict[str, int], str]:
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise ValueError(f"no seccomp filter for architecture {machine!r}")
    audit_arch, column = _ARCHES[machine]
    return audit_arch, {name: numbers[column] for name, numbers in _SYSCALLS.items()}, machine


def _prologue(audit_arch: int, machine: str) -> list[bytes]:
    """Kill other ABIs, then load the syscall number into A (every rule below expects it there)."""
    prog = [
        _insn(_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        _insn(_JEQ_K, 1, 0, audit_arch),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _OFFSET_NR),
    ]
    if machine == "x86_64":
        # x32 ABI numbers carry bit 30; deny them all rather than list their aliases.
        prog += [_insn(_JGE_K, 0, 1, 0x40000000), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    return prog


def _rule(nr: int, block: list[bytes]) -> list[bytes]:
    """``if A == nr: <block>`` where every path through `block` returns (A is left intact otherwise)."""
    assert len(block) <= 255
    return [_insn(_JEQ_K, 0, len(block), nr)] + block


def _deny(action: int) -> list[bytes]:
    return [_insn(_RET_K, 0, 0, action)]


def _deny_if_arg_in(arg: int, values: list[int]) -> list[bytes]:
    """Deny when the argument equals one of `values`, allow otherwise."""
    block = [_insn(_LD_W_ABS, 0, 0, _ARG_LOW[arg])]
    for value in values:
        block += [_insn(_JEQ_K, 0, 1, value), _insn(_RET_K, 0, 0, _EPERM)]
    return block + [_insn(_RET_K, 0, 0, _RET_ALLOW)]


def _allow_only_if(conditions: list[tuple[int, int]]) -> list[bytes]:
    """Allow when every (arg, value) pair matches, deny otherwise."""
    block: list[bytes] = []
    for arg, value in conditions:
        # On mismatch jump to the final deny: over the remaining checks (2 insns each) and the allow.
        remaining = 2 * (len(conditions) - len(block) // 2 - 1) + 1
        block += [_insn(_LD_W_ABS, 0, 0, _ARG_LOW[arg]), _insn(_JEQ_K, 0, remaining, value)]
    return block + [_insn(_RET_K, 0, 0, _RET_ALLOW), _insn(_RET_K, 0, 0, _EPERM)]


def _clone_rule(nr: int, denied_flags: int) -> list[bytes]:
    return _rule(
        nr,
        [
            _insn(_LD_W_ABS, 0, 0, _ARG_LOW[0]),
            _insn(_JSET_K, 0, 1, denied_flags),
            _insn(_RET_K, 0, 0, _EPERM),
            _insn(_RET_K, 0, 0, _RET_ALLOW),
        ],
    )


def build_filter(machine: str | None = None) -> bytes:
    """The worker filter: raw BPF (8 bytes per instruction) for `machine` (default: this one)."""
    audit_arch, nr, machine = _numbers(machine)
    prog = _prologue(audit_arch, machine)
    for name in _WORKER_DENIED:
        prog += _rule(nr[name], _deny(_EPERM))
    prog += _rule(nr["clone3"], _deny(_RET_ERRNO | errno.ENOSYS))
    prog += _clone_rule(nr["clone"], _CLONE_NAMESPACE_FLAGS)
    prog += _rule(
        nr["socket"],
        [
            _insn(_LD_W_ABS, 0, 0, _ARG_LOW[0]),
            _insn(_JEQ_K, 1, 0, _AF_UNIX),
            _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EACCES),
            _insn(_RET_K, 0, 0, _RET_ALLOW),
        ],
    )
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(prog)


def build_job_filter(machine: str | None = None) -> bytes:
    """The job filter (loaded on top of the worker filter), with `JOB_PLACEHOLDERS` to patch."""
    audit_arch, nr, machine = _numbers(machine)
    worker, zygote, worker_group = (
        JOB_PLACEHOLDERS["worker_pid"],
        JOB_PLACEHOLDERS["zygote_pid"],
        JOB_PLACEHOLDERS["worker_pgrp_negative"],
    )
    prog = _prologue(audit_arch, machine)
    for name in _JOB_DENIED:
        prog += _rule(nr[name], _deny(_EPERM))
    for name in _SELF_ONLY:
        prog += _rule(nr[name], _allow_only_if([(0, 0)]))
    prog += _rule(nr["setpriority"], _allow_only_if([(0, _PRIO_PROCESS), (1, 0)]))
    prog += _rule(nr["ioprio_set"], _allow_only_if([(0, _IOPRIO_WHO_PROCESS), (1, 0)]))
    every_process = 0xFFFFFFFF  # kill(-1, ...)
    prog += _rule(nr["kill"], _deny_if_arg_in(0, [worker, zygote, worker_group, every_process]))
    for name in ("tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        prog += _rule(nr[name], _deny_if_arg_in(0, [worker, zygote]))
    prog += _rule(nr["fcntl"], _deny_if_arg_in(1, [_F_SETOWN, _F_SETSIG, _F_SETOWN_EX, _F_SETPIPE_SZ]))
    prog += _rule(nr["setsockopt"], _deny_if_arg_in(2, [_SO_SNDBUF, _SO_RCVBUF, _SO_SNDBUFFORCE, _SO_RCVBUFFORCE]))
    prog += _rule(nr["ioctl"], _deny_if_arg_in(1, [_FIOSETOWN, _SIOCSPGRP, _TIOCSPGRP]))
    prog += _rule(
        nr["mmap"],
        [
            _insn(_LD_W_ABS, 0, 0, _ARG_LOW[3]),
            _insn(_JSET_K, 3, 0, _MAP_HUGETLB),
            _insn(_JSET_K, 0, 1, _MAP_ANONYMOUS),
            _insn(_JSET_K, 1, 0, _MAP_SHARED),
            _insn(_RET_K, 0, 0, _RET_ALLOW),
            _insn(_RET_K, 0, 0, _EPERM),
        ],
    )
    prog += _clone_rule(nr["clone"], _CLONE_NAMESPACE_FLAGS | _CLONE_PARENT)
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(prog)


def patch_job_filter(program: bytes, worker_pid: int, zygote_pid: int, worker_pgrp: int) -> bytes:
    """Replace the placeholders of `build_job_filter` by real values (the worker does the same in
    ``_worker_main.py``, which cannot import this module; this copy is for tests)."""
    values = {
        JOB_PLACEHOLDERS["worker_pid"]: worker_pid,
        JOB_PLACEHOLDERS["zygote_pid"]: zygote_pid,
        JOB_PLACEHOLDERS["worker_pgrp_negative"]: (-worker_pgrp) & 0xFFFFFFFF,
    }
    out = bytearray(program)
    for offset in range(0, len(out), 8):
        (k,) = struct.unpack_from("<I", out, offset + 4)
        if k in values:
            struct.pack_into("<I", out, offset + 4, values[k])
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# the filter of a test process in a run of many programs (the Coder–Tester's one-run catch
# reward: sandboxes.harness.run_function_tests_slots)

# name -> (x86_64 number, aarch64 number or None where the call does not exist there)
_TEST_PROCESS_SYSCALLS: dict[str, tuple[int, int | None]] = {
    "open": (2, None),
    "openat": (257, 56),
    "openat2": (437, 437),
    "creat": (85, None),
    "mkdir": (83, None),
    "mkdirat": (258, 34),
    "rmdir": (84, None),
    "unlink": (87, None),
    "unlinkat": (263, 35),
    "rename": (82, None),
    "renameat": (264, 38),
    "renameat2": (316, 276),
    "link": (86, None),
    "linkat": (265, 37),
    "symlink": (88, None),
    "symlinkat": (266, 36),
    "truncate": (76, 45),
    "chmod": (90, None),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "chown": (92, None),
    "fchown": (93, 55),
    "lchown": (94, None),
    "fchownat": (260, 54),
    "utime": (132, None),
    "utimes": (235, None),
    "futimesat": (261, None),
    "utimensat": (280, 88),
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "mknod": (133, None),
    "mknodat": (259, 33),
    "socket": (41, 198),
    "connect": (42, 203),
    "bind": (49, 200),
    "fork": (57, None),
    "vfork": (58, None),
    "clone": (56, 220),
    "clone3": (435, 435),
    "execve": (59, 221),
    "execveat": (322, 281),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    "setpriority": (141, 140),
    "ioprio_set": (251, 30),
    "prlimit64": (302, 261),
    "sched_setaffinity": (203, 122),
    "sched_setparam": (142, 118),
    "sched_setscheduler": (144, 119),
    "sched_setattr": (314, 274),
}
# Denied outright (EPERM): what creates, removes, re-modes or re-owns a file, every socket but a
# private pair (socketpair is another call), every new process, exec, every signal sent by the
# process (its own timer's SIGALRM comes from the kernel), and changes to any process's priority
# or scheduling.
_TEST_PROCESS_DENIED = [
    "openat2", "creat", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
    "renameat2", "link", "linkat", "symlink", "symlinkat", "truncate", "chmod", "fchmod",
    "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
    "lremovexattr", "fremovexattr", "mknod", "mknodat", "socket", "connect", "bind", "fork",
    "vfork", "execve", "execveat", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "setpriority", "ioprio_set", "sched_setaffinity", "sched_setparam",
    "sched_setscheduler", "sched_setattr",
]  # fmt: skip
# open()/openat() flags that write or create: O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND and
# __O_TMPFILE (the same values on x86_64 and aarch64).
_WRITE_OPEN_FLAGS = 0x1 | 0x2 | 0x40 | 0x200 | 0x400 | 0x400000
_CLONE_THREAD = 0x00010000


def build_test_process_filter(machine: str | None = None) -> bytes:
    """The filter of a test process in a run of many programs (raw BPF for `machine`, default
    this one), loaded on top of the worker and job filters by the driver
    (``sandboxes/_function_driver.py``) before it runs the problem's setup or any test.

    It takes away every way a test could leave something behind for a later program's tests in
    the same run, or reach another process: ``open``/``openat`` with a flag that writes or
    creates (`_WRITE_OPEN_FLAGS`), ``openat2``, and every call that creates, removes, renames,
    links, truncates, re-modes, re-owns or re-times a file (`_TEST_PROCESS_DENIED`); ``socket``,
    ``connect`` and ``bind`` (``socketpair`` stays: a private pair); ``fork``, ``vfork``,
    ``clone`` without ``CLONE_THREAD`` (threads stay: they die with the process; ``clone3`` is
    ``ENOSYS``, as under the worker filter, so that threads start through ``clone``), ``execve``; every signal it could send (``kill`` and the rest, itself included);
    ``setpriority``, ``ioprio_set``, ``sched_set*`` and ``prlimit64`` with a new limit. Each is
    refused with ``EPERM``. (SysV IPC, message queues, memfds and shared anonymous memory are
    already refused by the job filter.)
    """
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise ValueError(f"no seccomp filter for architecture {machine!r}")
    audit_arch, column = _ARCHES[machine]
    nr = {name: numbers[column] for name, numbers in _TEST_PROCESS_SYSCALLS.items() if numbers[column] is not None}
    prog = _prologue(audit_arch, machine)
    for name in _TEST_PROCESS_DENIED:
        if name in nr:
            prog += _rule(nr[name], _deny(_EPERM))
    for name, flags_arg in (("open", 1), ("openat", 2)):
        if name in nr:
            prog += _rule(
                nr[name],
                [
                    _insn(_LD_W_ABS, 0, 0, _ARG_LOW[flags_arg]),
                    _insn(_JSET_K, 0, 1, _WRITE_OPEN_FLAGS),
                    _insn(_RET_K, 0, 0, _EPERM),
                    _insn(_RET_K, 0, 0, _RET_ALLOW),
                ],
            )
    # clone3 keeps the worker filter's ENOSYS (the most recent filter's errno wins): glibc then
    # falls back to clone, whose flags are checked here, and threads still start.
    prog += _rule(nr["clone3"], _deny(_RET_ERRNO | errno.ENOSYS))
    prog += _rule(
        nr["clone"],
        [
            _insn(_LD_W_ABS, 0, 0, _ARG_LOW[0]),
            _insn(_JSET_K, 1, 0, _CLONE_THREAD),
            _insn(_RET_K, 0, 0, _EPERM),
            _insn(_RET_K, 0, 0, _RET_ALLOW),
        ],
    )
    # prlimit64(pid, resource, new_limit, old_limit): reading a limit (new_limit NULL) stays.
    prog += _rule(
        nr["prlimit64"],
        [
            _insn(_LD_W_ABS, 0, 0, _ARG_LOW[2]),
            _insn(_JEQ_K, 0, 2, 0),
            _insn(_LD_W_ABS, 0, 0, _ARG_LOW[2] + 4),
            _insn(_JEQ_K, 1, 0, 0),
            _insn(_RET_K, 0, 0, _EPERM),
            _insn(_RET_K, 0, 0, _RET_ALLOW),
        ],
    )
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(prog)
