"""A directory's git repository and branch, read from ``.git`` directly: hooks run every session
start and a ``git`` process costs more than the lookup. Nothing raises."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

# A project name as LORE_PROJECT accepts it (``lore_mcp.settings``).
_PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Branches that say nothing about the work on them.
PLAIN_BRANCHES = frozenset({"main", "master", "trunk", "develop", "dev", "HEAD"})


@dataclass(frozen=True)
class Workdir:
    """A directory's repository (its top folder's name) and branch; None where there is none."""

    repository: str | None = None
    branch: str | None = None

    @property
    def project(self) -> str | None:
        """The repository's name as a project name (other characters become ``-``), or None."""
        if not self.repository:
            return None
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", self.repository).strip("-._")[:64]
        return name if _PROJECT.fullmatch(name) else None

    @property
    def topic(self) -> str:
        """The branch's words (``fix/stripe-webhook-retry``: "fix stripe webhook retry"); '' for main."""
        if not self.branch or self.branch in PLAIN_BRANCHES:
            return ""
        return " ".join(w for w in re.split(r"[^A-Za-z0-9]+", self.branch) if w)

    @property
    def name_words(self) -> str:
        """The repository's name as words ("payments-api" says "payments api")."""
        return " ".join(w for w in re.split(r"[^A-Za-z0-9]+", self.repository or "") if w)


def workdir_of(directory: str | Path | None) -> Workdir:
    """The repository and branch ``directory`` is in (searching up from it)."""
    if not directory:
        return Workdir()
    with contextlib.suppress(OSError, ValueError):
        start = Path(directory).resolve()
        for folder in (start, *start.parents):
            dot_git = folder / ".git"
            if dot_git.exists():
                return Workdir(repository=folder.name or None, branch=_branch(_git_dir(dot_git)))
    return Workdir()


def _git_dir(dot_git: Path) -> Path:
    """The git directory: ``.git`` itself, or where a worktree's ``.git`` file points."""
    if dot_git.is_file():
        line = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if line.startswith("gitdir:"):
            target = Path(line.removeprefix("gitdir:").strip())
            return target if target.is_absolute() else dot_git.parent / target
    return dot_git


def _branch(git_dir: Path) -> str | None:
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return head.removeprefix("ref:").strip().removeprefix("refs/heads/") if head.startswith("ref:") else None
