"""Running calls on both backends at once and checking the properties (``tests/stores/properties``
says which): outcomes compared, errors that change nothing, no secret kept or answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mcp import Client

from lore_mcp.errors import CODES, INTERNAL_ERROR
from tests.support.clients import connected
from tests.support.fuzz_settings import CALL_SECONDS, COLLECT, OUTCOME_ONLY, STATS, TOOLS, ULID, VOLATILE_KEYS
from tests.support.fuzz_sides import Complaint, Outcome, Side, seed
from tests.support.fuzz_values import SEED_TABLE, planted_in
from tests.support.helpers import ERROR_TEXT
from tests.support.schema_strategies import (
    resolve,
)
from tests.support.secrets import seen

# --- running calls on both backends and checking the properties ---------------------------------


class LogCapture(logging.Handler):
    """What the server logged at ERROR while a call ran: the cause of an INTERNAL_ERROR."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        cause = record.exc_info[1] if record.exc_info else None
        detail = f" {type(cause).__name__}: {str(cause)[:300]}" if cause else ""
        self.lines.append(f"{record.getMessage()}{detail}")


@contextlib.contextmanager
def captured_errors() -> Iterator[LogCapture]:
    handler = LogCapture()
    logger = logging.getLogger("lore_mcp")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


async def call_once(client: Client, tool: str, arguments: dict[str, Any]) -> Outcome:
    """Call a tool and classify the answer; anything but a result or a coded error is a failure.
    Its cost is the process's CPU time (the server runs in it), the same on a busy machine."""
    start = time.process_time()
    with captured_errors() as log:
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as exc:  # the client itself could not make sense of the answer
            return Outcome(
                "CLIENT_RAISED", f"{type(exc).__name__}: {exc}", None, time.process_time() - start, log.lines
            )
    seconds = time.process_time() - start
    if not result.is_error:
        kind = "ok" if result.structured_content is not None else "NO_STRUCTURED_CONTENT"
        return Outcome(kind, "", result.structured_content, seconds, log.lines)
    text = result.content[0].text if result.content else ""
    match = ERROR_TEXT.match(text)
    kind = match["code"] if match and match["code"] in CODES else "UNCODED"
    return Outcome(kind, text, None, seconds, log.lines)


def comparable(value: Any) -> Any:
    """A result with what legitimately differs between backends set aside."""
    if isinstance(value, dict):
        return {k: "<varies>" if k in VOLATILE_KEYS else comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, str) and ULID.fullmatch(value):
        return "<ulid>"
    if isinstance(value, float) and math.isnan(value):
        return "<nan>"
    return value


def first_difference(a: Any, b: Any, where: str = "result") -> tuple[str | None, Any, Any]:
    """Where two results first differ (None when they agree), and the two values there.
    ``-0.0`` and ``0.0`` differ here, though Python's ``==`` says they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            found = first_difference(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{where}.{key}")
            if found[0] is not None:
                return found
        return None, a, b
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where} (length)", len(a), len(b)
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{where}[{index}]")
            if found[0] is not None:
                return found
        return None, a, b
    same = type(a) is type(b) and (a == b or repr(a) == repr(b))
    if same and isinstance(a, float):
        same = math.copysign(1, a) == math.copysign(1, b)
    return (None if same else where), a, b


def problems_with(tool: str, side: str, outcome: Outcome) -> list[Complaint]:
    """What is wrong with one answer on its own."""
    found = []
    if outcome.kind == INTERNAL_ERROR or outcome.kind not in ("ok", *CODES):
        cause = outcome.logged[0].split(" ", 2)[2].split(":")[0] if outcome.logged else ""
        found.append(
            Complaint(
                f"{tool} {side} {outcome.kind} {cause}",
                f"{side}: answered {outcome.kind}: {outcome.text[:300]}",
            )
        )
    if "Traceback" in outcome.text:
        found.append(Complaint(f"{tool} {side} traceback", f"{side}: the error text carries a traceback"))
    if outcome.seconds > CALL_SECONDS:
        found.append(
            Complaint(
                f"{tool} {side} slow", f"{side}: took {outcome.seconds:.1f} s of CPU (limit {CALL_SECONDS} s)"
            )
        )
    if outcome.logged and outcome.kind != INTERNAL_ERROR:
        found.append(Complaint(f"{tool} {side} logged", f"{side}: logged at ERROR: {outcome.logged}"))
    return found


def leaks(tool: str, side: str, needles: set[str], state: Any, outcome: Outcome) -> list[Complaint]:
    """A planted secret found in the store or the answer, as given or once folded (NFKC,
    invisible characters removed: what a reader would make of a disguised one)."""
    if not needles:
        return []
    text = json.dumps([state, outcome.result, outcome.text], default=str, ensure_ascii=False).lower()
    folded = seen(text).lower()
    return [
        Complaint(f"{tool} {side} secret kept", f"{side}: a planted secret was kept: {needle!r}")
        for needle in sorted(needles)
        if needle.lower() in text or seen(needle).lower() in folded
    ]


def shown(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} chars)"


@dataclass
class Pair:
    """The same calls on SQLite and on Postgres, side by side."""

    sides: list[Side]
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    counting: bool = True  # off while warming up, so ``--stats`` counts only the tests' calls

    def __repr__(self) -> str:
        return f"Pair({', '.join(side.name for side in self.sides)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Hypothesis prints the fixture with a failing example; the whole state would be
        tens of kB, which it warns about (an error under ``filterwarnings = error``)."""
        printer.text(repr(self))

    def run(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        """Run ``calls`` in order from the seeded state; raise AssertionError at the first call
        that breaks a property, naming the call, its arguments and every backend's answer."""
        asyncio.run(self._run(calls))

    async def _fresh(self, side: Side) -> None:
        if side.current is not None and side.current == side.seeded:
            return
        if side.store is not None:
            side.store.close()
        side.rebuild()
        async with connected(side.server) as client:
            await seed(client)
        side.seeded = side.current = side.fingerprint()

    async def _run(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        for side in self.sides:
            await self._fresh(side)
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(connected(side.server)) for side in self.sides]
            for step, (tool, raw) in enumerate(calls):
                outcomes: list[Outcome] = []
                complaints: list[Complaint] = []
                for side, client in zip(self.sides, clients, strict=True):
                    before = side.current
                    arguments = resolve(raw, side.lookup(raw.get("project")))
                    outcome = await call_once(client, tool, arguments)
                    outcomes.append(outcome)
                    complaints += problems_with(tool, side.name, outcome)
                    try:
                        side.current = side.fingerprint()
                    except Exception as exc:  # what the call stored cannot be read back
                        side.current = None  # the next example starts from a new store
                        complaints.append(
                            Complaint(
                                f"{tool} {side.name} store unreadable {type(exc).__name__}",
                                f"{side.name}: after this call the store cannot be read back "
                                f"({type(exc).__name__}: {str(exc)[:200]})",
                            )
                        )
                        continue
                    complaints += leaks(tool, side.name, planted_in(raw), side.current, outcome)
                    if outcome.kind != "ok" and side.current != before:
                        complaints.append(
                            Complaint(
                                f"{tool} {side.name} {outcome.kind} changed the store",
                                f"{side.name}: the {outcome.kind} changed the store",
                            )
                        )
                complaints += self._disagreements(tool, outcomes)
                if STATS and self.counting:
                    record_outcome(tool, outcomes[0])
                if complaints:
                    report = self._report(step, tool, raw, outcomes, complaints)
                    if COLLECT and self.counting:  # fuzz.py --collect: record it, go on to the next example
                        record_failure(tool, raw, complaints, report)
                        return
                    raise AssertionError(report)

    def _disagreements(self, tool: str, outcomes: list[Outcome]) -> list[Complaint]:
        kinds = [o.kind for o in outcomes]
        names = [side.name for side in self.sides]
        if len(set(kinds)) > 1:
            says = ", ".join(f"{name} {kind}" for name, kind in zip(names, kinds, strict=True))
            return [Complaint(f"{tool} disagree {says}", f"the backends disagree: {says}")]
        if tool in OUTCOME_ONLY or kinds[0] != "ok":
            return []
        results = [comparable(o.result) for o in outcomes]
        found = []
        for name, other in zip(names[1:], results[1:], strict=True):
            where, mine, theirs = first_difference(results[0], other)
            if where is not None:
                found.append(
                    Complaint(
                        f"{tool} differ {re.sub(r'[0-9]+', 'N', where)}",
                        f"the backends give different results at {where}: {names[0]} {shown(mine, 200)}, "
                        f"{name} {shown(theirs, 200)}",
                    )
                )
        return found

    def _report(
        self, step: int, tool: str, raw: dict[str, Any], outcomes: list[Outcome], complaints: list[Complaint]
    ) -> str:
        lines = [f"call {step}: {tool}({shown(raw)})", *(c.text for c in complaints)]
        for side, outcome in zip(self.sides, outcomes, strict=True):
            answer = outcome.text if outcome.kind != "ok" else shown(outcome.result, 1500)
            lines.append(
                f"  {side.name} -> {outcome.kind} in {outcome.seconds:.2f} s of CPU: {answer[:1500]}"
            )
            lines += [f"    logged: {line}" for line in outcome.logged]
        return "\n".join(lines)


def record_failure(tool: str, raw: dict[str, Any], complaints: list[Complaint], report: str) -> None:
    """Append one failure to the ``LORE_FUZZ_COLLECT`` file (JSON Lines) for ``benchmarks/fuzz.py``."""
    line = {
        "tool": tool,
        "signatures": [c.signature for c in complaints],
        "size": len(repr(raw)),
        "report": report,
    }
    with open(COLLECT, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def record_outcome(tool: str, outcome: Outcome) -> None:
    """Append how one call ended (on the first backend) to the ``LORE_FUZZ_STATS`` file."""
    message = outcome.text.split(": ", 1)[1] if ": " in outcome.text else outcome.text
    line = {"tool": tool, "kind": outcome.kind, "message": message[:60]}
    with open(STATS, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


async def _list_schemas(pair: Pair) -> None:
    side = pair.sides[0]
    side.rebuild()
    async with connected(side.server) as client:
        pair.schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    side.store.close()
    side.store = None


def _warm_up(pair: Pair) -> None:
    """Run every tool once on both backends before Hypothesis starts.

    Hypothesis mixes constants found in loaded modules into what it generates; modules
    first imported during an example (the Postgres driver's, error paths') would change
    that pool between runs of the same example, which Hypothesis reports as flaky.
    """
    sample = {
        "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "commit_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "table": SEED_TABLE,
    }
    sample |= {"query": "redis", "problem": "p", "resolution": "r", "name": "warm", "lessons": [], "plan": {}}
    pair.counting = False
    for tool in TOOLS:
        arguments = {k: v for k, v in sample.items() if k in pair.schemas[tool].get("properties", {})}
        with contextlib.suppress(AssertionError):
            pair.run([(tool, arguments)])
    pair.counting = True
