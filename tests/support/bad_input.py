"""What the bad-input suite (``tests/mcp/bad_input``) shares: a good lesson to spoil one field of,
and the checks that a call is refused with a coded sentence and that nothing was stored."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.support.helpers import ToolFailed, call

GOOD = {"problem": "Redis evicts keys early", "resolution": "Set maxmemory-policy to allkeys-lru"}


async def refused(client: Client, tool: str, code: str = "VALIDATION_ERROR", **arguments: Any) -> str:
    """The sentence of a call that must fail with ``code``."""
    with pytest.raises(ToolFailed) as err:
        await call(client, tool, **arguments)
    assert err.value.code == code, err.value
    assert "Traceback" not in err.value.message
    return err.value.message


async def fails(client: Client, tool: str, **arguments: Any) -> str:
    """The message of a call that must fail with VALIDATION_ERROR."""
    message = await refused(client, tool, **arguments)
    assert len(message) > 20  # a sentence, not a bare code
    return message


async def nothing_stored(client: Client, project: str | None = None) -> None:
    """No lesson and no commit in ``project`` (the default one when None)."""
    extra = {} if project is None else {"project": project}
    assert (await call(client, "list_lessons", limit=100, **extra))["lessons"] == []
    assert (await call(client, "history", **extra))["commits"] == []
