"""Launcher: the small privileged step between the host and a sandboxed worker.

Like ``_worker_main.py`` this file is not imported; its source runs as
``python -I -S -c <source> <json-config>``. It runs with the caller's privileges and, before it
``exec``s the real command (bubblewrap or the worker interpreter), it

* creates the namespaces asked for (best effort, reporting which ones it got): a user namespace
  (unprivileged callers), mount, network, IPC, UTS and pid namespaces;
* in the new mount namespace, mounts a small tmpfs over directories the sandbox could not
  traverse (e.g. ``/root`` around a pyenv interpreter) and bind-mounts back, read-only, only the
  paths the sandbox needs; makes the whole file system read-only where asked; mounts private,
  size-capped tmpfs over world-writable directories (``/tmp``, ``/dev/shm``) and binds back,
  read-only, the import-path entries that lived under them (a virtual environment in ``/tmp``);
* with a pid namespace, forks: the child becomes pid 1 of the namespace (so killing it or the
  launcher, via the parent-death signal, kills every process of the sandbox);
* as root, moves into a user namespace of its own that maps a whole block of unused host uids
  (``uid_range``), and becomes uid 0 there, keeping only the capabilities asked for: the worker
  then runs every job under a uid of that block that no other run, worker or host process has;
* finally ``exec``s the command with a minimal environment.

Before exec it writes one protocol frame ``{"launcher": {...}}`` on stdout so the host learns
what isolation was actually obtained.
"""

import ctypes
import json
import os
import signal
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and aarch64
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 1
NAMESPACE_FLAGS = {
    "mnt": CLONE_NEWNS,
    "net": CLONE_NEWNET,
    "ipc": CLONE_NEWIPC,
    "uts": CLONE_NEWUTS,
    "pid": CLONE_NEWPID,
}

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.syscall.restype = ctypes.c_long


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def _mount(source, target, fstype, flags, data):
    _check(
        libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        "mount %s" % target,
    )


def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def _send(obj):
    body = json.dumps(obj).encode()
    os.write(1, struct.pack(">I", len(body)) + body)


def _open_binds(paths):
    """O_PATH handles on `paths`, taken before anything is mounted over them."""
    return [(path, os.open(path, os.O_PATH)) for path in paths if os.path.exists(path)]


def _bind_back(bind_fds):
    for path, fd in bind_fds:
        if os.path.isdir("/proc/self/fd/%d" % fd):
            os.makedirs(path, exist_ok=True)
        elif not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        _mount("/proc/self/fd/%d" % fd, path, None, MS_BIND | MS_REC, None)
        try:
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)
        except OSError:
            pass  # read-only is a nicety: the sandbox uid cannot write there anyway
        os.close(fd)


def _open_view(ops):
    """O_PATH handles on every bind source of a view (``[op, ...]`` lists, see `_apply_view`),
    taken before anything is mounted over them."""
    handles = {}
    for op in ops:
        if op[0] == "bind" and op[1] not in handles and os.path.lexists(op[1]):
            handles[op[1]] = os.open(op[1], os.O_PATH)
    return handles


def _apply_view(ops, handles):
    """Build a file-system view, in order: ``["tmpfs", path, options]`` covers a directory with
    an empty tmpfs; ``["bind", source, target]`` binds a path read-only (as it was before any
    cover); ``["symlink", target, path]``; ``["dir", path]``. A missing path is skipped."""
    for op in ops:
        kind = op[0]
        if kind == "tmpfs":
            if os.path.isdir(op[1]) and not os.path.islink(op[1]):
                _mount("tmpfs", op[1], "tmpfs", MS_NOSUID | MS_NODEV, op[2])
        elif kind == "bind":
            fd = handles.get(op[1])
            if fd is None:
                continue
            target = op[2]
            source = "/proc/self/fd/%d" % fd
            if os.path.isdir(source):
                os.makedirs(target, exist_ok=True)
            elif not os.path.lexists(target):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                open(target, "a").close()
            _mount(source, target, None, MS_BIND | MS_REC, None)
            try:
                _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)
            except OSError:
                pass
        elif kind == "symlink":
            if not os.path.lexists(op[2]):
                os.symlink(op[1], op[2])
        elif kind == "dir":
            os.makedirs(op[1], exist_ok=True)
    for fd in handles.values():
        os.close(fd)


def _make_everything_read_only():
    """Every mount of this (private) mount namespace becomes read-only."""
    attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    result = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    if result == 0:
        return
    # Kernels before 5.12: remount each mount point read-only, parents first.
    with open("/proc/self/mountinfo") as fh:
        points = [line.split()[4] for line in fh]
    for point in points:
        point = point.encode().decode("unicode_escape")  # mountinfo escapes spaces as \040
        try:
            _mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)
        except OSError:
            pass


def _enter_uid_range(base, count):
    """Move into a new user namespace mapping uids/gids [0, count) to [base, base+count) on the
    host and become its uid 0. The map is written by a helper that stays in the parent namespace
    (a process cannot map foreign ids for itself)."""
    ready_r, ready_w = os.pipe()
    target = os.getpid()
    helper = os.fork()
    if helper == 0:
        try:
            os.close(ready_w)
            if os.read(ready_r, 1) != b"x":
                os._exit(1)
            _write("/proc/%d/uid_map" % target, "0 %d %d" % (base, count))
            _write("/proc/%d/setgroups" % target, "deny")
            _write("/proc/%d/gid_map" % target, "0 %d %d" % (base, count))
            os._exit(0)
        except BaseException:
            os._exit(1)
    os.close(ready_r)
    failed = libc.unshare(CLONE_NEWUSER) != 0
    err = ctypes.get_errno()
    os.write(ready_w, b"-" if failed else b"x")
    os.close(ready_w)
    _, status = os.waitpid(helper, 0)
    if failed:
        raise OSError(err, "unshare(CLONE_NEWUSER): %s" % os.strerror(err))
    if status != 0:
        raise OSError(0, "could not write the uid map of the sandbox's user namespace")
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def _limit_capabilities(keep):
    """Leave only `keep` in the bounding set: what uid 0 gets back when it execs the command."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except OSError:
        last = 40
    for cap in range(last + 1):
        if cap not in keep:
            _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "prctl(PR_CAPBSET_DROP, %d)" % cap)


def main():
    cfg = json.loads(sys.argv[1])
    applied, errors = [], {}
    if cfg.get("uid_range"):
        os.setgroups([])  # no supplementary group of the host's root may follow into the sandbox
    if cfg.get("userns"):
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER) == 0:
            # Map our own ids to themselves: inside we stay a non-root uid, and lose the
            # namespace's capabilities when we exec.
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", "%d %d 1" % (uid, uid))
            _write("/proc/self/gid_map", "%d %d 1" % (gid, gid))
            applied.append("user")
        else:
            errors["user"] = os.strerror(ctypes.get_errno())
    for name in cfg.get("namespaces", []):
        if libc.unshare(NAMESPACE_FLAGS[name]) == 0:
            applied.append(name)
        else:
            errors[name] = os.strerror(ctypes.get_errno())
    if "mnt" in applied:
        try:
            # Nothing we mount may propagate back to the host.
            _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
            cover_binds = _open_binds(cfg.get("binds", []))
            private_binds = _open_binds(cfg.get("private_binds", []))
            view = _open_view(cfg.get("view", []))
            private_view = _open_view(cfg.get("private_view", []))
            for cover in cfg.get("covers", []):
                _mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
            _bind_back(cover_binds)
            if cfg.get("view"):
                _apply_view(cfg["view"], view)
                applied.append("view")
            if cfg.get("readonly_root"):
                try:
                    _make_everything_read_only()
                    applied.append("readonly_root")
                except OSError as exc:
                    errors["readonly_root"] = str(exc)
            private = []
            for directory in cfg.get("private_dirs", []):
                if os.path.isdir(directory):
                    _mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, cfg.get("private_dir_options", "mode=1777"))
                    private.append(directory)
            _bind_back(private_binds)
            _apply_view(cfg.get("private_view", []), private_view)
            applied.append("private_dirs")
            if private:
                # Tell the worker which directories are its own to wipe between jobs.
                cfg.setdefault("env", {})["SANDBOX_PRIVATE_DIRS"] = ":".join(private)
        except OSError as exc:
            errors["mnt"] = str(exc)
    missing = [name for name in cfg.get("required", []) if name not in applied]
    if missing:
        sys.stderr.write(
            "sandbox launcher: could not create %s (%s)\n"
            % (", ".join(missing), "; ".join("%s: %s" % (k, v) for k, v in errors.items()))
        )
        sys.exit(70)
    if "pid" in applied:
        parent_pid = os.getpid()
        child = os.fork()
        if child:
            # Stay as the namespace's outside handle: release the pipes and relay the status.
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            while True:
                try:
                    _, status = os.waitpid(child, 0)
                    break
                except InterruptedError:
                    continue
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        if "mnt" in applied:
            try:
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            except OSError:
                pass
    else:
        parent_pid = None
    if cfg.get("uid_range"):
        try:
            base, count = cfg["uid_range"]
            _enter_uid_range(base, count)
            if cfg.get("keep_caps") is not None:
                _limit_capabilities(set(cfg["keep_caps"]))
            applied.append("uid_range")
        except OSError as exc:
            sys.stderr.write("sandbox launcher: cannot enter the sandbox's user namespace: %s\n" % exc)
            sys.exit(70)
    if parent_pid is not None:
        # Set after every credential change, which clears it: if the launcher dies, so does pid 1.
        # (No getppid() check for the race with the parent's death: in the new pid namespace it
        # reads 0. The host also kills the launcher's whole process group, which includes us.)
        _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    _send({"launcher": {"applied": applied, "errors": errors}})
    argv = cfg["argv"]
    os.execve(argv[0], argv, cfg.get("env", {}))


main()
