"""Child processes that file permissions bind, as they bind a user, even when the tests run as root.

Root ignores read-only files and directories (CAP_DAC_OVERRIDE), so a test of what a user
sees on a read-only database would pass for the wrong reason. ``bound_by_permissions``
wraps a command so that, under root, it first drops CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH from its capability bounding set (``prctl(PR_CAPBSET_DROP)``, allowed
to root, also in Docker's default capability set) and then execs: the new program runs as
root still, with the same files and environment, but the kernel checks mode bits for it as
for anyone. Under any other user the command is run unchanged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Run as ``python -c WRAPPER [stderr file or ""] command...``.
WRAPPER = """
import ctypes, os, sys
if os.name == "posix" and os.geteuid() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            sys.exit("tests: cannot drop capability %d: %s" % (cap, os.strerror(ctypes.get_errno())))
if sys.argv[1]:
    log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
os.execv(sys.argv[2], sys.argv[2:])
"""


def bound_by_permissions(command: list[str], *, stderr_to: Path | None = None) -> list[str]:
    """``command`` run so that read-only files stop it (see the module docstring); its stderr
    goes to ``stderr_to`` when given (for clients that keep a server's stderr to themselves)."""
    return [sys.executable, "-c", WRAPPER, str(stderr_to or ""), *command]


def make_read_only(*paths: Path) -> None:
    """Take the write bits off each path (a file, or a directory: nothing can be created in it)."""
    for path in paths:
        path.chmod(path.stat().st_mode & ~0o222)


def make_writable(*paths: Path) -> None:
    """Give the owner's write bit back (so tmp_path can be cleaned up by a user who is not root)."""
    for path in paths:
        if path.exists():
            path.chmod(path.stat().st_mode | 0o200)


def is_root() -> bool:
    return os.name == "posix" and os.geteuid() == 0
