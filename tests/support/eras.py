"""The two MCP eras a test client speaks, named once for the in-process ``client`` fixture
(``tests/conftest.py``) and the process matrix (``tests/process/test_eras.py``).

``legacy`` is the initialize handshake with its session (revisions up to 2025-11-25);
``2026-07-28`` is the current revision: no ``initialize``, no session, ``server/discover`` first.
"""

from __future__ import annotations

# Each era with the test id it gets, so a test's name says which one ran.
ERAS = {"legacy": "era-legacy", "2026-07-28": "era-2026-07-28"}
# The revision each era's client ends up on (legacy: the newest one ``initialize`` offers).
PROTOCOL_VERSIONS = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}


def client_mode(era: str) -> str:
    """``Client(mode=...)`` for ``era``: the handshake, or discovery, which lands on the current
    revision as a current client's first request does (a bare revision string would skip
    ``server/discover`` and so never learn the server's name or instructions)."""
    return "legacy" if era == "legacy" else "auto"
