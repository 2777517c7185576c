"""Whether this user can write a SQLite database and its WAL files, else what is in the way and the
fix, checked without writing: SQLite opens an unwritable file read-only and fails at the first write
(WAL needs the directory writable too), so ``doctor`` warns first and a refused write names the cause."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Unwritable:
    """What keeps SQLite from writing a database (``problem``) and what to do (``fix``)."""

    problem: str
    fix: str

    def sentence(self, consequence: str) -> str:
        """One sentence: the problem, what it means here (``consequence``), then the fix."""
        return f"{self.problem}, {consequence}: {self.fix}."


def unwritable(path: Path | str) -> Unwritable | None:
    """Why ``path``, its WAL files or (the nearest existing) directory is unwritable, or None."""
    if str(path) == ":memory:":
        return None
    file = Path(path)
    for each in (file, Path(f"{file}-wal"), Path(f"{file}-shm")):
        if each.exists() and not os.access(each, os.W_OK):
            return _read_only_file(file, each)
    folder = file.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or os.access(folder, os.W_OK | os.X_OK):
        return None  # writable, or a file where a directory should be (not a permission problem)
    fix = f"run `chmod u+w {shlex.quote(str(folder))}` or set LORE_DB_PATH to a file in a writable directory"
    if file.exists():
        where = f"where SQLite keeps the Lore database's {file.name}-wal and {file.name}-shm files"
    else:
        where = f"where the Lore database {file} would be created"
    return Unwritable(f"The directory {folder}, {where}, is read-only for this user", fix)


def _read_only_file(database: Path, file: Path) -> Unwritable:
    """A read-only file: chmod when it is this user's, chown (of every file of the database) when not."""
    owner = _owner_name(file)
    if owner is None:
        return Unwritable(
            f"The Lore database file {file} is read-only for this user",
            f"run `chmod u+w {shlex.quote(str(file))}` or set LORE_DB_PATH to a writable file",
        )
    me = _owner_name(None) or "$USER"
    return Unwritable(
        f"The Lore database file {file} belongs to {owner} and is read-only for this user",
        f"run `sudo chown {me} {shlex.quote(str(database))}*` or set LORE_DB_PATH to a writable file",
    )


def _owner_name(file: Path | None) -> str | None:
    """``file``'s owner if not this user (None: this user's name); None without Unix owners."""
    try:
        import pwd
    except ImportError:  # Windows: no owners to compare; chmod's advice stands
        return None
    uid = os.geteuid() if file is None else file.stat().st_uid
    if file is not None and uid == os.geteuid():
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"user {uid}"
