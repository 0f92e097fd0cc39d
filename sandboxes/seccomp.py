"""A small seccomp-BPF filter, assembled by hand so no library (libseccomp) is needed.

The filter is built on the host and loaded by the warm worker inside the sandbox (with
``PR_SET_NO_NEW_PRIVS``), so the worker and every program it forks inherit it. It allows
everything except:

* sockets of any family but ``AF_UNIX`` (``EACCES``): no network even where no network
  namespace could be created;
* syscalls a program never needs and that widen the kernel attack surface (``EPERM``):
  ptrace, mount/umount/pivot_root, unshare/setns, namespace flags on clone, bpf,
  perf_event_open, keyrings, kernel modules, kexec, reboot, swap, userfaultfd, io_uring;
* ``clone3`` (``ENOSYS``), whose flags live in memory a filter cannot inspect; glibc then falls
  back to ``clone``, whose flags are checked;
* any other syscall ABI (e.g. 32-bit calls on x86-64), which would bypass the numbers above:
  the process is killed.
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
_OFFSET_ARG0_LOW = 16  # args[0], low 32 bits on little-endian machines

_AF_UNIX = 1
_CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x02000000

# name -> (x86_64 number, aarch64 number)
_SYSCALLS: dict[str, tuple[int, int]] = {
    "socket": (41, 198),
    "clone": (56, 220),
    "clone3": (435, 435),
    "ptrace": (101, 117),
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
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsmount": (432, 432),
}
_DENIED_EPERM = [name for name in _SYSCALLS if name not in ("socket", "clone", "clone3")]
_ARCHES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def supported() -> bool:
    """Whether a filter can be built for this machine's architecture."""
    return platform.machine() in _ARCHES


def build_filter(machine: str | None = None) -> bytes:
    """Return the raw BPF program (8 bytes per instruction) for `machine` (default: this one)."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise ValueError(f"no seccomp filter for architecture {machine!r}")
    audit_arch, column = _ARCHES[machine]
    nr = {name: numbers[column] for name, numbers in _SYSCALLS.items()}
    prog: list[bytes] = [
        _insn(_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        _insn(_JEQ_K, 1, 0, audit_arch),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _OFFSET_NR),
    ]
    if machine == "x86_64":
        # x32 ABI numbers carry bit 30; deny them all rather than list their aliases.
        prog += [_insn(_JGE_K, 0, 1, 0x40000000), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    for name in _DENIED_EPERM:
        prog += [_insn(_JEQ_K, 0, 1, nr[name]), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM)]
    prog += [_insn(_JEQ_K, 0, 1, nr["clone3"]), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    prog += [
        _insn(_JEQ_K, 0, 4, nr["clone"]),
        _insn(_LD_W_ABS, 0, 0, _OFFSET_ARG0_LOW),
        _insn(_JSET_K, 0, 1, _CLONE_NAMESPACE_FLAGS),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        _insn(_JEQ_K, 0, 4, nr["socket"]),
        _insn(_LD_W_ABS, 0, 0, _OFFSET_ARG0_LOW),
        _insn(_JEQ_K, 1, 0, _AF_UNIX),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EACCES),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(prog)
