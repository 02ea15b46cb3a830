"""Make the file system read-only except a few directories, lock that, then exec a command.

Contract: `python -I fs_lock.py [--no-lock] [--no-nest] [--loopback-up] [--rw DIR]... [--ro PATH]...
[--hide DIR]... [--cwd DIR] -- ARGV...` must run inside a fresh mount namespace of a user namespace (the
sandbox's `unshare --user --map-root-user --mount`). In order:
1. `--loopback-up`: bring up the network namespace's own `lo` (compute-sanitizer talks to its
   target over TCP; nothing outside the namespace is reachable through it).
2. Hide: an empty tmpfs over every `--hide DIR` that exists and holds no writable DIR (the
   evaluator's lock files: a process that could open them could flock them and stall every
   timing on its GPU). Lock: bind-mount every DIR onto itself, mark every mount of the tree read-only with one
   recursive `mount_setattr(2)` (Linux >= 5.12), clear read-only again on the DIRs and on the
   top mounts of the pseudo file systems /dev, /proc and /sys (not below them: /dev/shm, where
   evaluations exchange tensors, stays read-only). Then every `--ro PATH` (inside a DIR: the
   agent's protected workspace files) is bind-mounted onto itself read-only.
3. Nest: enter a new user namespace and a new mount namespace below this one (`unshare(2)`,
   mapping root to root). Mounts inherited from a more privileged namespace are locked by the
   kernel (MNT_LOCK_READONLY and friends): ARGV, root in its own namespace, can no longer
   clear the read-only flags (`mount -o remount,rw` fails with EPERM), unmount a pin or a hiding
   tmpfs to reveal what lies beneath it, or do anything else to a mount it did not make itself.
4. chdir to `--cwd` and exec ARGV.
The changes live only in the private mount namespaces (unshare makes propagation private), so
the caller's view is untouched.

Why the pseudo file systems stay writable: with all of them read-only the CUDA driver's cuInit
fails (error 304) on the H200 machine; they hold device nodes, this pid namespace's own /proc
and kernel attributes, not files a candidate could plant for the evaluator.

Not guaranteed: reads are not restricted (the process can read what the caller's uid can);
writes to /dev, /proc and /sys are only as restricted as the user namespace makes them; a
kernel without mount_setattr makes this script exit 126 with the reason, and the sandbox probe
then drops the layer (`--no-lock`); where nesting fails the probe drops it (`--no-nest`) and
the record says the flags are not locked.

Standard library only: it runs before the child imports anything else.
"""

from __future__ import annotations

import ctypes
import os
import sys

_SYS_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY = 0x1
_MS_BIND, _MS_REC = 4096, 16384
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
PSEUDO = ("/dev", "/proc", "/sys")  # top mounts left writable (see the docstring)
KEEP_LOCKED = ("/dev/shm",)  # other evaluations' scratch dirs live here: read-only even where it is part of /dev


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def _set_attr(libc: ctypes.CDLL, path: str, *, set_: int = 0, clr: int = 0, recursive: bool = True) -> None:
    nr = _SYS_MOUNT_SETATTR.get(os.uname().machine)
    if nr is None:
        raise OSError(38, f"mount_setattr number unknown on {os.uname().machine}")
    attr = _MountAttr(set_, clr, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    if libc.syscall(nr, _AT_FDCWD, path.encode(), flags, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        _fail(f"mount_setattr {path}")


def _bind(libc: ctypes.CDLL, path: str) -> None:
    if libc.mount(path.encode(), path.encode(), None, _MS_BIND | _MS_REC, None) != 0:
        _fail(f"bind {path}")


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def hide(libc: ctypes.CDLL, hidden: list[str], writable: list[str]) -> None:
    """An empty tmpfs over each hidden dir; one that holds a writable dir stays (hiding it would
    hide what the command must write). Made read-only and locked with the rest by `lock`/`nest`."""
    for d in (os.path.realpath(h) for h in hidden):
        if os.path.isdir(d) and not any(_inside(w, d) for w in writable):
            if libc.mount(b"tmpfs", d.encode(), b"tmpfs", 0, b"size=4k,mode=0555") != 0:
                _fail(f"hide {d}")


def lock(writable: list[str], readonly: list[str] = (), hidden: list[str] = ()) -> None:  # type: ignore[assignment]
    libc = _libc()
    dirs = [os.path.realpath(d) for d in writable]
    hide(libc, list(hidden), dirs)
    for d in KEEP_LOCKED:  # make it its own mount first, so that unlocking /dev leaves it read-only
        if os.path.isdir(d) and not os.path.ismount(d):
            _bind(libc, d)
    for d in dirs:  # each writable dir becomes its own mount, so its flags can differ from its parent's
        _bind(libc, d)
    _set_attr(libc, "/", set_=_MOUNT_ATTR_RDONLY)
    for d in dirs:
        _set_attr(libc, d, clr=_MOUNT_ATTR_RDONLY)
    for d in PSEUDO:
        if os.path.ismount(d):
            _set_attr(libc, d, clr=_MOUNT_ATTR_RDONLY, recursive=False)
    for p in readonly:  # pins inside a writable dir (protected workspace files)
        real = os.path.realpath(p)
        if os.path.lexists(real):
            _bind(libc, real)
            _set_attr(libc, real, set_=_MOUNT_ATTR_RDONLY)


def nest() -> None:
    """Enter a user + mount namespace below this one, root mapped to root: the kernel locks every
    mount flag set above (a less privileged namespace cannot clear them)."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
        _fail("unshare (nested user namespace)")
    for path, text in (
        ("/proc/self/setgroups", "deny"),
        ("/proc/self/uid_map", f"0 {uid} 1"),
        ("/proc/self/gid_map", f"0 {gid} 1"),
    ):
        with open(path, "w") as f:
            f.write(text)


def loopback_up() -> None:
    """Bring this network namespace's own `lo` up (it starts down). Only processes inside the
    namespace can be reached through it; compute-sanitizer talks to its target over TCP."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), siocgifflags, req))[1]
        fcntl.ioctl(s.fileno(), siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def _values(opts: list[str], flag: str) -> list[str]:
    return [opts[i + 1] for i, a in enumerate(opts) if a == flag and i + 1 < len(opts)]


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(
            "usage: fs_lock.py [--no-lock] [--no-nest] [--loopback-up] [--rw DIR]... [--ro PATH]... [--hide DIR]... [--cwd DIR] -- ARGV...",
            file=sys.stderr,
        )
        return 2
    cut = argv.index("--")
    opts, cmd = argv[:cut], argv[cut + 1 :]
    if not cmd:
        print("fs_lock: no command", file=sys.stderr)
        return 2
    try:
        if "--loopback-up" in opts:
            loopback_up()  # before nesting: only the namespace that owns the network may configure it
        if "--no-lock" not in opts:
            lock(_values(opts, "--rw"), _values(opts, "--ro"), _values(opts, "--hide"))
            if "--no-nest" not in opts:
                nest()
        for d in _values(opts, "--cwd")[-1:]:
            os.chdir(d)
    except OSError as e:
        print(f"fs_lock: {e}", file=sys.stderr)
        return 126
    os.execvp(cmd[0], cmd)
    return 127  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
