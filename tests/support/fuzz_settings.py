"""What the property tests (``tests/stores/properties``) call with and how long: the tools, the
example counts and Hypothesis settings, and an embedder without the model."""

from __future__ import annotations

import os
import re

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.tools.registry import TOOL_GROUPS
from tests.support.helpers import vector

ORG = "local"
ALL_GROUPS = ("lessons", "structured", "history", "admin")
TOOLS = sorted({name for group in ALL_GROUPS for name in TOOL_GROUPS[group]})
EXAMPLES = int(os.environ.get("LORE_FUZZ_EXAMPLES", "25"))
# Seconds of this process's CPU a call may spend (not wall-clock time, which a busy neighbour
# stretches): generous, an in-memory call takes milliseconds; the issue asks that none can
# freeze the server. A call that waits instead of computing meets the server's own deadline.
CALL_SECONDS = float(os.environ.get("LORE_FUZZ_CALL_SECONDS", "10"))
# Set by ``benchmarks/fuzz.py --collect``: failures are written here and the run goes on, so a
# long run lists every distinct failure instead of stopping at the first.
COLLECT = os.environ.get("LORE_FUZZ_COLLECT")
# Set by ``benchmarks/fuzz.py --stats``: every call's outcome is written here, to see how many
# calls get past argument validation and reach the stores.
STATS = os.environ.get("LORE_FUZZ_STATS")
ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
# Results differ between backends in these without anything being wrong.
VOLATILE_KEYS = frozenset(
    {"created_at", "updated_at", "expires_at", "last_used_at", "revoked_at", "score", "key", "prefix"}
)
# Ranking is fused differently per backend (FTS5 and tsvector score words differently),
# so which lessons a recall returns may differ; only the outcome is compared.
OUTCOME_ONLY = frozenset({"recall_lessons"})


def fuzz_settings() -> settings:
    """CI: a fixed seed and no failure database, so a run is reproducible, and no shrinking.

    Every example runs on two backends from a freshly seeded state, so shrinking a failure
    can take Hypothesis many minutes; CI reports the failing example as found (the report
    names the call, its arguments and both answers). ``benchmarks/fuzz.py`` sets
    ``LORE_FUZZ_RANDOM=1`` for fresh examples each run, remembered under ``.hypothesis/``,
    and ``LORE_FUZZ_SHRINK=1`` to shrink what it finds to a minimal example.
    """
    randomized = os.environ.get("LORE_FUZZ_RANDOM") == "1"
    shrink = os.environ.get("LORE_FUZZ_SHRINK") == "1"
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
    return settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not randomized,
        database=DirectoryBasedExampleDatabase(".hypothesis/examples") if randomized else None,
        phases=[*phases, Phase.shrink, Phase.explain] if shrink else phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=randomized,
    )


# --- an embedder without the model -------------------------------------------------------------


class HashEngine:
    """The default model's shape (384-d unit vectors), from a hash of the text, at once.

    Text the real tokenizer cannot take (a lone surrogate) fails here too: ``vector``
    encodes it as strict UTF-8, as the model's tokenizer refuses it with a TypeError.
    """

    runtime = "hash"
    dimension = 384
    fingerprint = "lore-tests/hash-384"

    def load(self) -> None:
        """Nothing to load."""

    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        return np.stack([vector(text) for text in texts])


def hash_embedder() -> Embedder:
    """An ``Embedder`` on ``HashEngine``, loaded."""
    embedder = Embedder("hash", engine=HashEngine())
    embedder.wait()
    return embedder
