"""The gate for heavy calls: one org's heavy work takes only its share, waits are bounded and
refusals say BUSY with when to retry (``lore_mcp.transport.admission``)."""

from __future__ import annotations

import asyncio

import pytest

from lore_mcp.transport.admission import Busy, HeavyGate
from stores import deadline


async def hold(gate: HeavyGate, org: str, key: str, release: asyncio.Event, started: list[str]) -> None:
    async with gate.slot(org, key):
        started.append(f"{org}/{key}")
        await release.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_one_org_filling_its_share_leaves_a_slot_for_another_org() -> None:
    gate = HeavyGate(3, max_wait_s=5)
    assert gate.per_org == 2
    release, started = asyncio.Event(), []
    busy = [asyncio.create_task(hold(gate, "acme", f"k{i}", release, started)) for i in range(4)]
    await settle()
    assert started == ["acme/k0", "acme/k1"]  # acme's share; its other two wait
    other = asyncio.create_task(hold(gate, "globex", "g", release, started))
    await settle()
    assert started[-1] == "globex/g"  # not behind acme's waiting calls
    assert gate.load().running == 3 and gate.load().waiting == 2
    release.set()
    await asyncio.gather(*busy, other)
    assert sorted(started) == ["acme/k0", "acme/k1", "acme/k2", "acme/k3", "globex/g"]
    assert gate.load().running == 0 and gate.load().waiting == 0


async def test_a_call_that_waits_too_long_is_refused_as_busy_with_when_to_retry() -> None:
    gate = HeavyGate(1, max_wait_s=0.2)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(gate, "acme", "k", release, started))
    await settle()
    with pytest.raises(Busy) as refused:
        async with gate.slot("acme", "k2"):
            pytest.fail("ran without a slot")
    assert refused.value.code == "BUSY"
    assert "busy with other heavy work" in refused.value.message
    assert "changed nothing" in refused.value.message
    assert refused.value.message.endswith(f"Try again in {refused.value.retry_after_s} s.")
    assert refused.value.retry_after_s >= 1
    assert gate.load().waiting == 0  # the refused call left the queue
    release.set()
    await holder
    async with gate.slot("acme", "k2"):  # and the slot is free again
        assert gate.load().running == 1


async def test_a_wait_never_outlasts_the_request_deadline() -> None:
    gate = HeavyGate(1, max_wait_s=30)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(gate, "acme", "k", release, started))
    await settle()
    loop = asyncio.get_running_loop()
    began = loop.time()
    with deadline.limit(1.5), pytest.raises(Busy):
        async with gate.slot("globex", "g"):
            pass
    assert loop.time() - began < 1.5  # refused with time left to answer
    release.set()
    await holder


async def test_an_org_with_a_full_queue_is_refused_at_once() -> None:
    gate = HeavyGate(1, queue_per_org=2, max_wait_s=30)
    release, started = asyncio.Event(), []
    tasks = [asyncio.create_task(hold(gate, "acme", f"k{i}", release, started)) for i in range(3)]
    await settle()
    assert gate.load().waiting == 2
    with pytest.raises(Busy) as refused:
        async with gate.slot("acme", "k9"):
            pass
    assert "most heavy calls waiting" in refused.value.message
    # Another org still queues: the bound is per org.
    other = asyncio.create_task(hold(gate, "globex", "g", release, started))
    await settle()
    assert gate.load().waiting == 3
    release.set()
    await asyncio.gather(*tasks, other)
    assert len(started) == 4


async def test_waiters_start_in_order_of_arrival_and_a_key_keeps_its_own_cap() -> None:
    gate = HeavyGate(2, per_org=2, per_key=1, max_wait_s=5)
    releases = [asyncio.Event() for _ in range(4)]
    started: list[str] = []
    first = asyncio.create_task(hold(gate, "acme", "same", releases[0], started))
    await settle()
    second = asyncio.create_task(hold(gate, "acme", "same", releases[1], started))  # same key: waits
    await settle()
    third = asyncio.create_task(hold(gate, "acme", "other", releases[2], started))  # behind its org's waiter
    await settle()
    assert started == ["acme/same"]
    releases[0].set()
    await first
    await settle()
    assert started == ["acme/same", "acme/same", "acme/other"]
    for event in releases:
        event.set()
    await asyncio.gather(second, third)


async def test_a_cancelled_waiter_gives_its_place_up() -> None:
    gate = HeavyGate(1, max_wait_s=5)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(gate, "acme", "k", release, started))
    await settle()
    waiter = asyncio.create_task(hold(gate, "globex", "g", release, started))
    await settle()
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert gate.load().waiting == 0
    release.set()
    await holder
    assert gate.load().running == 0
