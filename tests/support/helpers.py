"""Small helpers shared by the tests: calling tools, reading error codes, making vectors."""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np
from mcp import Client

ERROR_TEXT = re.compile(r"^(?P<code>[A-Z_]+): (?P<message>.+)$", re.DOTALL)
DIM = 384


class ToolFailed(Exception):
    """A tool call that came back as an MCP tool error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool; return its structured content or raise ``ToolFailed`` with the wire code."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = result.content[0].text
        match = ERROR_TEXT.match(text)
        assert match, f"error text without a code: {text!r}"
        raise ToolFailed(match["code"], match["message"])
    assert result.structured_content is not None
    return result.structured_content


def vector(name: str, noise: float = 0.0, noise_seed: int = 0) -> np.ndarray:
    """A deterministic unit vector per name; ``noise`` nudges it to make near-duplicates."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    vec = rng.standard_normal(DIM).astype(np.float32)
    if noise:
        vec += noise * np.random.default_rng(noise_seed).standard_normal(DIM).astype(np.float32)
    return vec / np.linalg.norm(vec)


def blend(a: np.ndarray, b: np.ndarray, weight_b: float) -> np.ndarray:
    """A unit vector between a and b, so tests can make one lesson closer to a query than another."""
    vec = (1 - weight_b) * a + weight_b * b
    return (vec / np.linalg.norm(vec)).astype(np.float32)
