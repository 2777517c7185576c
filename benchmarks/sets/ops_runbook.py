"""Ops-runbook lessons: an evaluation set where the attribute that tells siblings apart is paraphrased.

Why it exists (issue 24): Lore's recall was tuned on the sets it is measured on. This set was
written independently of the other generators in ``benchmarks/`` (own vocabulary, own templates,
own paraphrases) so that a ranking change can be judged on data it was not shaped on.

What it holds: operations/SRE runbook lessons of a web product company (TLS certificates, DNS
cut-overs, migrations, queues, caches, feature flags, CI pipelines, alerts, autoscaling, CDN,
backups, secrets ...). Lessons come in *families* of 3-8 near-identical siblings: one scenario,
one problem and resolution template and the same details, differing only in one or two
distinguishing attributes, the ``axis`` of the family: the environment (production, staging,
test, development, canary, disaster recovery), the client platform (mobile, web, desktop, smart
TV, partner API), the owning team, the service (two-word names; siblings share one word), or
environment and platform together.

Each question paraphrases one lesson's problem in other words and names the family's axis the
way its ``kind`` says: ``literal`` (as the lesson writes it, about a quarter of questions),
``env-synonym`` ("the live environment" for production), ``platform-synonym`` ("the phones" for
mobile clients), ``role`` ("whoever carries the pager" for the site reliability engineering
team), ``abbreviation`` (prod, DR, SRE, DBAs, "auth proxy" for authentication-proxy),
``spacing`` (PaymentGateway or payment gateway for payment-gateway) and ``two-attribute``
(environment and platform both in other words). The other attributes a question needs are named
literally. Each lesson carries its canonical attribute values in ``slots``; each question the
values it names in ``asks``, chosen so that exactly one lesson of the corpus has them all, and
``build`` checks that in code: the right answer follows from the slots, never from text
similarity. Lessons also carry ``family`` and ``axis`` (which attribute the siblings differ in);
the last family may be cut short by ``size``. Pure standard library; deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from typing import Any

from benchmarks.sets.ops_runbook_scenarios import SCENARIOS
from benchmarks.sets.ops_runbook_vocab import ATTRIBUTES, PREFIXES, SPELLINGS, SUFFIXES, Scenario, spell

Lesson = dict[str, Any]
Question = dict[str, Any]

# Which attribute(s) siblings of a family differ in, and how often a family takes each.
AXES: tuple[tuple[str, ...], ...] = (("env",), ("platform",), ("team",), ("service",), ("env", "platform"))
AXIS_WEIGHTS = (24, 22, 22, 18, 14)
LITERAL_SHARE = 0.25
MIN_SIBLINGS = 3
KINDS = ("literal", "env-synonym", "platform-synonym", "role", "abbreviation", "spacing", "two-attribute")
# The order in which further attributes are named when the axis alone is not enough.
EXTRA_ORDER = ("service", "env", "platform", "team")
SERVICES = tuple(f"{p}-{s}" for p in PREFIXES for s in SUFFIXES)
MONTHS = ("January", "March", "April", "June", "August", "September", "October", "December")
END_TEMPLATES = (
    "What fixed {core}{where}?",
    "How did we resolve {core}{where}?",
    "Is there a runbook note about {core}{where}?",
    "We hit {core}{where}; what was the fix last time?",
    "Any lesson on {core}{where}?",
)
FRONT_TEMPLATES = ("{where}: {core}. What was done about it?", "{where}, {core} - how was it solved?")


def build(size: int, questions: int = 200, seed: int = 20261126) -> dict[str, list[dict]]:
    """``{"lessons": [...], "questions": [...]}``: ``size`` lessons in families of siblings and
    ``questions`` paraphrased questions, each with exactly one right lesson (checked here)."""
    rng = random.Random(seed)
    lessons, spellings = _corpus(rng, size)
    asked = _questions(rng, lessons, spellings, min(questions, len(lessons)))
    _check(lessons, asked)
    return {"lessons": lessons, "questions": asked}


def _corpus(rng: random.Random, size: int) -> tuple[list[Lesson], list[str]]:
    """The lessons, family by family, with the service spelling each lesson uses."""
    lessons: list[Lesson] = []
    spellings: list[str] = []
    used: set[tuple[str, ...]] = set()
    family = 0
    while len(lessons) < size:
        for lesson, spelling in _family(rng, family, used):
            if len(lessons) < size:
                lessons.append(lesson)
                spellings.append(spelling)
        family += 1
    return lessons, spellings


def _family(rng: random.Random, family: int, used: set[tuple[str, ...]]) -> list[tuple[Lesson, str]]:
    """One family of siblings; a sibling whose slots another lesson already has is left out, and
    a family left with fewer than ``MIN_SIBLINGS`` is not made at all (the attribute must decide)."""
    scenario = rng.choice(SCENARIOS)
    axis = rng.choices(AXES, AXIS_WEIGHTS)[0]
    base = {
        "scenario": scenario.name,
        "service": rng.choice(SERVICES),
        **{attr: rng.choice(sorted(values)) for attr, values in ATTRIBUTES.items()},
    }
    shared = {
        "problem": rng.randrange(len(scenario.problems)),
        "resolution": rng.randrange(len(scenario.resolutions)),
        "spelling": rng.choice(SPELLINGS[:3]),
        **{slot: rng.choice(choices) for slot, choices in scenario.details.items()},
    }
    siblings = [{**base, **variant} for variant in _variants(rng, axis, base)]
    siblings = [slots for slots in siblings if _identity(slots) not in used]
    if len(siblings) < MIN_SIBLINGS:
        return []
    out: list[tuple[Lesson, str]] = []
    for slots in siblings:
        used.add(_identity(slots))
        key = f"ops-f{family:05d}-{len(out)}"
        lesson = _lesson(rng, key, scenario, slots, shared)
        lesson["family"] = f"ops-f{family:05d}"
        lesson["axis"] = "+".join(axis)
        out.append((lesson, str(shared["spelling"])))
    return out


def _identity(slots: dict[str, str]) -> tuple[str, ...]:
    """What no two lessons share: the scenario and every attribute."""
    return tuple(slots[k] for k in ("scenario", "service", "env", "platform", "team"))


def _variants(rng: random.Random, axis: tuple[str, ...], base: dict[str, str]) -> list[dict[str, str]]:
    """The axis values of the siblings: 3-8 of them, the base's own first."""
    if axis == ("service",):
        prefix, suffix = base["service"].split("-")
        same_prefix = [f"{prefix}-{s}" for s in SUFFIXES]
        same_suffix = [f"{p}-{suffix}" for p in PREFIXES]
        pool = same_prefix if rng.random() < 0.5 else same_suffix
        combos = [{"service": s} for s in pool]
    elif axis == ("env", "platform"):
        combos = [
            {"env": e, "platform": p}
            for e in sorted(ATTRIBUTES["env"])
            for p in sorted(ATTRIBUTES["platform"])
        ]
    else:
        combos = [{axis[0]: v} for v in sorted(ATTRIBUTES[axis[0]])]
    count = min(len(combos), rng.randint(3, 8))
    first = {k: base[k] for k in axis}
    others = [c for c in combos if c != first]
    return [first, *rng.sample(others, count - 1)]


def _lesson(rng: random.Random, key: str, scenario: Scenario, slots: dict[str, str], shared: dict) -> Lesson:
    """One lesson as an agent would save it, every slot written the way lessons write it."""
    prefix, suffix = slots["service"].split("-")
    fill = {
        **{k: v for k, v in shared.items() if k in scenario.details},
        "svc": spell(prefix, suffix, shared["spelling"]),
        "env": ATTRIBUTES["env"][slots["env"]].lesson,
        "plat": ATTRIBUTES["platform"][slots["platform"]].lesson,
        "team": ATTRIBUTES["team"][slots["team"]].lesson,
    }
    context = rng.choice(
        (
            f"From the postmortem of OPS-{rng.randint(1000, 9999)}.",
            f"Found in the {rng.choice(MONTHS)} incident review.",
            None,
        )
    )
    return {
        "key": key,
        "problem": _capital(scenario.problems[shared["problem"]].format(**fill)),
        "resolution": _capital(scenario.resolutions[shared["resolution"]].format(**fill)),
        "context": context,
        "tags": [*scenario.tags, slots["env"], slots["platform"]],
        "slots": dict(slots),
    }


def _capital(text: str) -> str:
    """The text with its first letter upper-case (templates may start with a lower-case phrase)."""
    return text[:1].upper() + text[1:]


def _questions(rng: random.Random, lessons: list[Lesson], spellings: list[str], count: int) -> list[Question]:
    """``count`` questions whose targets are spread uniformly over the corpus."""
    index = _index(lessons)
    scenarios = {s.name: s for s in SCENARIOS}
    out = []
    for number, target in enumerate(sorted(rng.sample(range(len(lessons)), count))):
        lesson = lessons[target]
        axis = tuple(lesson["axis"].split("+"))
        kind = _kind(rng, axis, lesson["slots"])
        asks = _asks(lesson["slots"], axis, index)
        names = _names(rng, kind, axis, asks, spellings[target])
        core = rng.choice(scenarios[asks["scenario"]].cores).format(svc=names.pop("service", "the service"))
        text = _phrase(rng, core, names)
        out.append(
            {
                "id": f"ops-q{number:04d}",
                "text": text,
                "kind": kind,
                "evidence": [lesson["key"]],
                "asks": asks,
            }
        )
    return out


def _kind(rng: random.Random, axis: tuple[str, ...], slots: dict[str, str]) -> str:
    """How the question names the family's axis: literally or in which other words."""
    if rng.random() < LITERAL_SHARE:
        return "literal"
    if axis == ("env", "platform"):
        return "two-attribute"
    attr = axis[0]
    if attr == "service":
        has_short = bool(PREFIXES[slots["service"].split("-")[0]])
        return "abbreviation" if has_short and rng.random() < 0.5 else "spacing"
    has_short = bool(ATTRIBUTES[attr][slots[attr]].abbreviations)
    if has_short and rng.random() < 0.4:
        return "abbreviation"
    return {"env": "env-synonym", "platform": "platform-synonym", "team": "role"}[attr]


def _asks(
    slots: dict[str, str], axis: tuple[str, ...], index: dict[tuple[str, str], set[str]]
) -> dict[str, str]:
    """The scenario, the axis and as few more attributes as make exactly one lesson match."""
    asks = {"scenario": slots["scenario"], **{k: slots[k] for k in axis}}
    for extra in EXTRA_ORDER:
        if len(matching(index, asks)) == 1:
            break
        asks[extra] = slots[extra]
    return asks


def _index(lessons: list[Lesson]) -> dict[tuple[str, str], set[str]]:
    """The keys of the lessons holding each (attribute, canonical value)."""
    index: dict[tuple[str, str], set[str]] = defaultdict(set)
    for lesson in lessons:
        for attr, value in lesson["slots"].items():
            index[(attr, value)].add(lesson["key"])
    return index


def matching(index: dict[tuple[str, str], set[str]], asks: dict[str, str]) -> set[str]:
    """The keys of the lessons whose slots hold every value ``asks`` names."""
    return set.intersection(*(index.get(item, set()) for item in asks.items()))


def _names(
    rng: random.Random, kind: str, axis: tuple[str, ...], asks: dict[str, str], spelling: str
) -> dict[str, str]:
    """How the question writes each attribute it asks for (the scenario is said by the core)."""
    names = {}
    for attr, value in asks.items():
        other = kind != "literal" and attr in axis
        if attr == "service":
            names[attr] = _service(rng, value, spelling, kind if other else "literal")
        elif attr in ATTRIBUTES:
            entry = ATTRIBUTES[attr][value]
            if not other:
                names[attr] = entry.lesson
            elif kind == "abbreviation":
                names[attr] = rng.choice(entry.abbreviations)
            else:
                names[attr] = rng.choice(entry.synonyms)
    return names


def _service(rng: random.Random, service: str, spelling: str, kind: str) -> str:
    """The service as the question writes it: the lesson's spelling, another, or abbreviated."""
    prefix, suffix = service.split("-")
    if kind == "literal":
        return spell(prefix, suffix, spelling)
    if kind == "abbreviation":
        return spell(PREFIXES[prefix], suffix, rng.choice(SPELLINGS))
    return spell(prefix, suffix, rng.choice([s for s in SPELLINGS if s != spelling]))


def _phrase(rng: random.Random, core: str, names: dict[str, str]) -> str:
    """The question: the paraphrased problem with its attributes before or after it."""
    parts = []
    if "env" in names:
        parts.append(f"in {names['env']}")
    if "platform" in names:
        parts.append(rng.choice(("for", "affecting", "hitting")) + f" {names['platform']}")
    rng.shuffle(parts)
    front = bool(parts or "team" in names) and rng.random() < 0.3
    if "team" in names:
        team = "owned by {}" if front else rng.choice(("owned by {}", "that {} handled"))
        parts.insert(0 if front else len(parts), team.format(names["team"]))
    if front:
        return _capital(rng.choice(FRONT_TEMPLATES).format(where=", ".join(parts), core=core))
    where = (" " + " ".join(parts)) if parts else ""
    return _capital(rng.choice(END_TEMPLATES).format(core=core, where=where))


def _check(lessons: list[Lesson], questions: list[Question]) -> None:
    """Raise unless keys are unique and each question's asks match exactly its evidence."""
    keys = [lesson["key"] for lesson in lessons]
    if len(set(keys)) != len(keys):
        raise ValueError("ops_runbook: two lessons share a key")
    index = _index(lessons)
    for question in questions:
        hits = sorted(matching(index, question["asks"]))
        if hits != question["evidence"]:
            raise ValueError(f"ops_runbook: question {question['id']} matches {hits}, not its evidence")


def duplicate_share(lessons: list[Lesson]) -> float:
    """The share of lessons whose problem and resolution repeat another's after lower-casing
    and collapsing white space (what a save-time near-duplicate merge would see first)."""
    texts = Counter(re.sub(r"\s+", " ", f"{x['problem']} {x['resolution']}".lower()).strip() for x in lessons)
    return sum(n - 1 for n in texts.values()) / max(len(lessons), 1)
