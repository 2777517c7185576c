"""The suite's own pytest settings: a worker that dies ends the run with its error.

Issue 34, item 10: on a busy machine one xdist worker died and the README's test command
(``-n 2 --dist loadscope``) hung until it was stopped at 50 minutes, hiding every result:
pytest-xdist replaced the worker and its loadscope scheduler then waited for work that never
came. Here a small suite with a test that ends its process runs under pyproject.toml's settings.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
XDIST = ("-p", "no:cacheprovider", "-n", "2", "--dist", "loadscope")  # the README's test command


def test_a_worker_that_dies_ends_the_run_with_its_error_instead_of_a_hang(tmp_path: Path) -> None:
    for name in "acd":
        (tmp_path / f"test_{name}.py").write_text(f"def test_{name}1(): pass\ndef test_{name}2(): pass\n")
    (tmp_path / "test_b.py").write_text(
        "import os\n\ndef test_b1():\n    os._exit(3)\n\ndef test_b2():\n    pass\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            # Its own base, not the default one: starting there, pytest takes the group and other
            # bits off /tmp/pytest-of-<user>, and the outer run's Postgres (another user, which
            # pgserver let through) then stops at its next checkpoint on "Permission denied".
            "--basetemp",
            str(tmp_path / "base"),
            *XDIST,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,  # the run hung for ever before
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "crashed and worker restarting disabled" in run.stdout
    assert re.search(r"worker 'gw\d' crashed while running '\S*test_b\.py::test_b1'", run.stdout), run.stdout
    assert re.search(r"FAILED \S*test_b\.py::test_b1", run.stdout), run.stdout
