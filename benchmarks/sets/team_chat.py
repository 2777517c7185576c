"""team_chat: multi-session work chats between two or three colleagues, one lesson per turn (issue 24).

Why: Lore's conversation recall was tuned on the set it is measured on. This set is written from
scratch (its own people, companies, templates and ways of asking) so that a ranking change can be
judged on chats it has never seen. It asks what is hard in a long chat: facts said once among
turns about similar things (other people, other customers, other dates), answers that need two
turns, dates said relative to the day ("last Tuesday"), answers that follow from a turn without
sharing its words, facts that changed (the older turn is a trap), and questions about what was
never said.

How: each conversation is a small company's chat (``size`` conversations, one project each),
20-40 dated sessions over about a year, 6-16 turns each. Facts are planted from the templates in
``team_chat_facts`` into chosen sessions; each template has a key (a customer, a role, a week,
a speaker ...) that at most one turn (or one chain of updates) of the conversation holds, so the
right turn is decided by the slots, never by text similarity. About half again as many planted
turns are asked nothing and stand as near misses; filler turns (``team_chat_vocab.FILLER``, never
repeated word for word) make up the rest. Questions name a slot in other words most of the time
("PaymentGateway" for "payment gateway", "the UX person" for "product designer"), the speaker's
name for "I", and never quote the turn. "next <weekday>" is the first one after the turn's day, "last
<weekday>" the latest before it. Pure stdlib, deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from benchmarks.sets import team_chat_vocab as v
from benchmarks.sets.team_chat_dates import FUTURE, PAST, relative_day
from benchmarks.sets.team_chat_facts import FACTS, INFERENCE, TWO_TURN, UPDATE, WHEN, Template

KINDS = ("fact", "two-turn", "when", "inference", "update", "unanswerable")
WEIGHTS = (0.26, 0.16, 0.16, 0.16, 0.12, 0.14)
TEMPLATES: dict[str, tuple[Template, ...]] = {
    "fact": FACTS,
    "two-turn": TWO_TURN,
    "when": WHEN,
    "inference": INFERENCE,
    "update": UPDATE,
}
MAX_PLANTS = 8  # planted turns per session, so that filler always surrounds them
NOT_SAID = "Not mentioned in this chat."


@dataclass
class Plant:
    """One planted turn, before it has a place (and so a key) in its session."""

    session: int
    speaker: str
    text: str
    slots: dict[str, str]
    key: str = ""


@dataclass
class Conv:
    """One conversation while it is built."""

    cid: str
    rng: random.Random
    people: list[str]
    starts: list[datetime]
    thirds: list[str]
    plants: list[Plant] = field(default_factory=list)
    used: dict[str, set[str]] = field(default_factory=dict)
    asked: list[tuple[dict[str, Any], list[Plant], list[Plant]]] = field(default_factory=list)


def build(size: int = 12, questions: int = 500, seed: int = 20261126) -> dict[str, list[dict]]:
    """``size`` conversations (one project each) and ``questions`` questions spread over them."""
    rng = random.Random(seed)
    seen: set[str] = set()
    lessons: list[dict] = []
    asked: list[dict] = []
    for i in range(size):
        conv = _new_conv(f"teamchat-{i + 1:02d}", random.Random(rng.getrandbits(64)))
        share = questions // size + (1 if i < questions % size else 0)
        kinds = _quota(share)
        for kind in kinds:
            if kind != "unanswerable":
                _ask(conv, kind)
        for _ in range(share // 2):
            _ask(conv, conv.rng.choice(KINDS[:4]), question=False)
        turns = _layout(conv, seen)
        text = " ".join(t["resolution"] for t in turns).lower()
        for _ in range(kinds.count("unanswerable")):
            _unanswerable(conv, text)
        lessons.extend(turns)
        asked.extend(_finish(conv))
    return {"lessons": lessons, "questions": asked}


def _new_conv(cid: str, rng: random.Random) -> Conv:
    """Two or three colleagues and 20-40 session start times, on distinct weekdays over a year."""
    people = rng.sample(v.PARTICIPANTS, rng.choice((2, 3, 3)))
    first = date(2025, 1, 6) + timedelta(days=rng.randrange(40))
    days = [first + timedelta(days=d) for d in range(330)]
    days = sorted(rng.sample([d for d in days if d.weekday() < 5], rng.randint(20, 40)))
    starts = [
        datetime(d.year, d.month, d.day, 8, 30) + timedelta(minutes=rng.randrange(0, 510)) for d in days
    ]
    thirds = list(v.THIRD_PARTIES)
    rng.shuffle(thirds)
    return Conv(cid, rng, people, starts, thirds)


def _quota(n: int) -> list[str]:
    """``n`` question kinds in the proportions of ``WEIGHTS`` (cumulative rounding)."""
    kinds: list[str] = []
    total = 0.0
    for kind, weight in zip(KINDS, WEIGHTS, strict=True):
        total += weight
        kinds += [kind] * (round(total * n) - len(kinds))
    return kinds


def _ask(conv: Conv, kind: str, question: bool = True) -> None:
    """Plant the turns for one question of ``kind`` (asked, or only as a near miss)."""
    planters = {"fact": _plant_fact, "two-turn": _plant_two, "when": _plant_when}
    planters |= {"inference": _plant_inference, "update": _plant_update}
    for _ in range(20):
        made = planters[kind](conv, conv.rng.choice(TEMPLATES[kind]), question)
        if made is not None:
            conv.plants.extend(made[1] + made[2])
            if question:
                conv.asked.append(made)
            return


def _sessions(conv: Conv, k: int) -> list[int] | None:
    """``k`` distinct sessions in order, each with room for one more planted turn."""
    load = [0] * len(conv.starts)
    for p in conv.plants:
        load[p.session] += 1
    free = [s for s, n in enumerate(load) if n < MAX_PLANTS]
    return sorted(conv.rng.sample(free, k)) if len(free) >= k else None


def _draw(conv: Conv, pool: Any, day: date) -> Any:
    """A value for one slot: from a word list, or worked out from the conversation and ``day``."""
    rng = conv.rng
    if pool == "@person":
        return rng.choice(conv.thirds)
    if pool == "@participant":
        return rng.choice(conv.people)
    if pool == "@ticket":
        return f"#{rng.randint(1200, 9800)}"
    if pool == "@month":
        return v.MONTH_NAMES[(day + timedelta(days=rng.randint(35, 120))).month - 1]
    later = day + timedelta(days=rng.randint(10, 60))
    if pool == "@week":
        later -= timedelta(days=later.weekday())
    return f"{v.MONTH_NAMES[later.month - 1]} {later.day}"


def _fill(conv: Conv, tpl: Template, day: date, me: str) -> dict[str, str] | None:
    """Slots for one use of ``tpl`` whose key the conversation has not used yet (and marks it used)."""
    used = conv.used.setdefault(tpl["tid"], set())
    for _ in range(40):
        slots = {"me": me, "fact": tpl["tid"]}
        for name, pool in tpl["pools"].items():
            value = _draw(conv, pool, day) if isinstance(pool, str) else conv.rng.choice(pool)
            _put(conv.rng, slots, name, value)
        key = "|".join(slots[k] for k in tpl["key"])
        person = slots.get("person", "")
        if key not in used and person not in conv.used.get("@person", set()):
            used.add(key)
            conv.used.setdefault("@person", set()).add(person)
            conv.used["@person"].discard("")
            return slots | {"key": key}
    return None


def _put(rng: random.Random, slots: dict[str, str], name: str, value: str | tuple[str, ...]) -> None:
    """Fill a slot; a tuple gives ``name``, ``name_1``... and ``name_q`` (other words 7 in 10)."""
    if isinstance(value, str):
        slots[name] = value
        return
    for i, part in enumerate(value):
        slots[f"{name}_{i}" if i else name] = part
    slots[f"{name}_q"] = value[1] if rng.random() < 0.7 else value[0]


def _plant_one(
    conv: Conv, tpl: Template, extra: dict[str, str] | None = None
) -> tuple[Plant, dict[str, str]] | None:
    """One planted turn of ``tpl`` (``extra`` slots added) in a free session, by a random colleague."""
    sessions = _sessions(conv, 1)
    if sessions is None:
        return None
    me = conv.rng.choice(conv.people)
    slots = _fill(conv, tpl, conv.starts[sessions[0]].date(), me)
    if slots is None:
        return None
    slots |= extra or {}
    return Plant(sessions[0], me, _said(conv.rng, tpl["turns"], slots), slots), slots


def _said(rng: random.Random, wordings: tuple[str, ...], slots: dict[str, str]) -> str:
    """A planted turn in one of its wordings, half the time with an aside, as people write."""
    text = _fmt(rng.choice(wordings), slots)
    text = text[0].upper() + text[1:]
    return f"{text} {rng.choice(v.ASIDES)}" if rng.random() < 0.5 else text


def _fmt(text: str, slots: dict[str, str]) -> str:
    """Fill ``text``; twice, since a slot's value may name other slots (``DIETS`` name ``{me}``)."""
    return text.format(**slots).format(**slots)


def _question(conv: Conv, tpl: Template, slots: dict[str, str], kind: str, answer: str) -> dict[str, Any]:
    """A question of ``kind`` about ``slots``, in one of the template's wordings."""
    asks = {k: slots[k] for k in tpl["key"]} | {"fact": tpl["tid"]}
    text = _fmt(conv.rng.choice(tpl["questions"]), slots)
    return {"text": text, "kind": kind, "answer": _fmt(answer, slots), "asks": asks, "slots": dict(slots)}


Made = tuple[dict[str, Any], list[Plant], list[Plant]]


def _plant_fact(conv: Conv, tpl: Template, question: bool) -> Made | None:
    made = _plant_one(conv, tpl)
    if made is None:
        return None
    plant, slots = made
    return _question(conv, tpl, slots, "fact", tpl["answer"].format(**slots)), [plant], []


def _plant_two(conv: Conv, tpl: Template, question: bool) -> Made | None:
    """Turn ``a`` before turn ``b``, about one fresh person; a near miss gets only one of them."""
    sessions = _sessions(conv, 2)
    if sessions is None:
        return None
    slots = _fill(conv, tpl, conv.starts[sessions[0]].date(), conv.rng.choice(conv.people))
    if slots is None:
        return None
    parts = ("a", "b") if question else (conv.rng.choice("ab"),)
    rng = conv.rng
    plants = [Plant(s, rng.choice(conv.people), _said(rng, tpl[f"turns_{p}"], slots), slots | {"part": p}) for s, p in zip(sessions, parts, strict=False)]  # fmt: skip
    return _question(conv, tpl, slots, "two-turn", tpl["answer"].format(**slots)), plants, []


def _plant_when(conv: Conv, tpl: Template, question: bool) -> Made | None:
    """A turn that dates something relative to its own day; the answer is the day it means."""
    phrase = conv.rng.choice(PAST if tpl["rel"] == "past" else FUTURE)
    made = _plant_one(conv, tpl, {"rel": phrase, "relative": phrase})
    if made is None:
        return None
    plant, slots = made
    base = conv.starts[plant.session].date()
    slots["base_date"] = base.isoformat()
    return _question(conv, tpl, slots, "when", relative_day(phrase, base).isoformat()), [plant], []


def _plant_inference(conv: Conv, tpl: Template, question: bool) -> Made | None:
    made = _plant_one(conv, tpl)
    if made is None:
        return None
    plant, slots = made
    if tpl["tid"] != "leave":
        return _question(conv, tpl, slots, "inference", tpl["answer"].format(**slots)), [plant], []
    week = v.ORDINALS.index(slots["ordinal"])
    inside = conv.rng.random() < 0.75
    days = (
        [d for d in range(1, 29) if (d - 1) // 7 == week]
        if inside
        else [d for d in range(1, 29) if (d - 1) // 7 != week]
    )
    slots["day"] = str(conv.rng.choice(days))
    answer = (
        f"No: {slots['me']} is on leave that week." if inside else f"Yes: {slots['me']} is away another week."
    )
    return _question(conv, tpl, slots, "inference", answer), [plant], []


def _plant_update(conv: Conv, tpl: Template, question: bool) -> Made | None:
    """A chain of 2-3 turns in order, each giving a new value; the last one is the answer."""
    sessions = _sessions(conv, conv.rng.choice((2, 2, 3)))
    if sessions is None:
        return None
    slots = _fill(conv, tpl, conv.starts[sessions[-1]].date(), "")
    if slots is None:
        return None
    values = [slots["value"]]
    while len(values) < len(sessions):
        pool = tpl["pools"]["value"]
        day = conv.starts[sessions[-1]].date()
        value = _draw(conv, pool, day) if isinstance(pool, str) else conv.rng.choice(pool)
        if value != values[-1] and (tpl.get("speaker_is_value") or value not in values):
            values.append(value)
    plants = []
    for i, (s, value) in enumerate(zip(sessions, values, strict=True)):
        me = value if tpl.get("speaker_is_value") else conv.rng.choice(conv.people)
        step = slots | {"value": value, "previous": values[i - 1] if i else "", "step": str(i)}
        text = _said(conv.rng, tpl["change" if i else "first"], step)
        plants.append(Plant(s, me, text, step))
    asked = _question(conv, tpl, slots | {"value": values[-1]}, "update", values[-1])
    return asked, plants[-1:], plants[:-1]


def _unanswerable(conv: Conv, text: str) -> None:
    """A fact's question with a key the chat never mentions; a turn of the same fact is the trap."""
    rng = conv.rng
    for _ in range(40):
        tpl = rng.choice(FACTS + WHEN)
        traps = [p for p in conv.plants if p.slots.get("fact") == tpl["tid"]]
        if not traps:
            continue
        slots = _fill(conv, tpl, conv.starts[-1].date(), rng.choice(conv.people))
        if slots is None:
            continue
        named = [slots[k] for k in tpl["key"] if k != "me"] + [slots.get(f"{k}_1", "") for k in tpl["key"]]
        if any(n and re.search(rf"\b{re.escape(n.lower())}\b", text) for n in named):
            continue
        asked = _question(conv, tpl, slots, "unanswerable", NOT_SAID)
        conv.asked.append((asked, [], rng.sample(traps, min(2, len(traps)))))
        return


def _layout(conv: Conv, seen: set[str]) -> list[dict]:
    """Every session's turns (planted ones at random places among filler), keyed and timed."""
    rng = conv.rng
    lessons = []
    for s, start in enumerate(conv.starts):
        planted = [p for p in conv.plants if p.session == s]
        n = max(rng.randint(6, 16), min(16, len(planted) + 4))
        at = dict(zip(sorted(rng.sample(range(n), len(planted))), planted, strict=True))
        when, speaker = start, ""
        for t in range(n):
            plant = at.get(t) or Plant(s, _other(rng, conv.people, speaker), _filler(rng, seen), {})
            when += timedelta(minutes=rng.randint(1, 6), seconds=rng.randrange(60))
            plant.key, speaker = f"{conv.cid}-s{s + 1:02d}-t{t + 1:02d}", plant.speaker
            lessons.append(_lesson(conv, plant, s, t, when))
    return lessons


def _lesson(conv: Conv, plant: Plant, s: int, t: int, when: datetime) -> dict[str, Any]:
    day = when.date().isoformat()
    slots = {"fact": plant.slots.get("fact", ""), "key": plant.slots.get("key", "")}
    slots |= {"part": plant.slots.get("part", plant.slots.get("step", ""))}
    slots |= {"speaker": plant.speaker, "session": str(s + 1), "turn": str(t + 1)}
    return {
        "key": plant.key,
        "problem": f"{plant.speaker} ({day}): {plant.text}",
        "resolution": plant.text,
        "context": f"chat {conv.cid}, session {s + 1}, {day} {when:%H:%M}",
        "tags": ["chat"],
        "project": conv.cid,
        "created_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "slots": slots,
    }


def _other(rng: random.Random, people: list[str], last: str) -> str:
    return rng.choice([p for p in people if p != last] or people)


def _filler(rng: random.Random, seen: set[str]) -> str:
    """A turn about nothing any question asks, not said before in this build if it can help it."""
    text = ""
    for _ in range(30):
        day, day2 = rng.sample(v.WEEKDAYS[:5], 2)
        hour, hour2 = sorted(rng.sample(v.FILLER_EXTRA["hour"], 2))
        extra = {name: rng.choice(pool) for name, pool in v.FILLER_EXTRA.items()}
        text = rng.choice(v.FILLER).format(
            code=rng.choice(v.CODENAMES), n=rng.randint(2, 40), n2=rng.randint(0, 9), bug=rng.choice(v.BUGS),
            customer=rng.choice(v.CUSTOMERS), room=rng.choice(v.ROOMS), snack=rng.choice(v.SNACKS),
            month=rng.choice(v.MONTH_NAMES), weekday=day, weekday2=day2, show=rng.choice(v.SHOWS),
            who=rng.choice(v.PARTICIPANTS), **extra | {"hour": hour, "hour2": hour2},
        )  # fmt: skip
        if text not in seen:
            break
    seen.add(text)
    return text


def _finish(conv: Conv) -> list[dict]:
    """The conversation's questions with ids, evidence and trap keys, in the order they were made."""
    out = []
    for j, (asked, evidence, traps) in enumerate(conv.asked):
        q = {"id": f"{conv.cid}-q{j + 1:03d}", "project": conv.cid} | asked
        q["evidence"] = [p.key for p in evidence]
        if q["kind"] in ("update", "unanswerable"):
            q["trap"] = [p.key for p in traps]
        out.append(q)
    return out
