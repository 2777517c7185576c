"""Copies of Lore for ``paired.py`` to serve beside the baseline: ``lore_mcp`` and ``stores`` from a
checkout, with a script that patches them at start-up as the copy's ``sitecustomize.py`` (Python
imports it in every process that has the copy on ``PYTHONPATH``). ``held_in_memory.py``,
``model_runtimes.py`` and ``combined_tree.py`` write their trees so."""

from __future__ import annotations

import shutil
from pathlib import Path


def write_tree(source: Path, tree: Path, script: Path, choice_file: str, choice: str) -> None:
    """``source``'s packages in ``tree``, ``script`` as its ``sitecustomize``, and ``choice`` beside
    it in ``choice_file`` (what the script reads to know what to patch)."""
    for package in ("lore_mcp", "stores"):
        shutil.copytree(source / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(script, tree / "sitecustomize.py")
    (tree / choice_file).write_text(choice)
