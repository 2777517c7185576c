"""Data-platform lessons: an evaluation set where one paraphrased attribute decides (issue 24).

Why it exists: Lore's recall was tuned on the sets it is measured on. This set was written
without looking at those generators or at the ranking code, from its own vocabulary
(``data_platform_vocab``) and scenarios (``data_platform_scenarios``): data-engineering and ML
platform incidents (batch jobs, streaming consumers, warehouse loads, notebooks, training,
serving, schema migrations, GPU node pools, object storage, permissions).

How it is built: a *family* is one scenario on one entity ("spark-oom" on ``orders_rollup``);
its 3-8 *siblings* share the text word for word and differ only in one distinguishing attribute
(cloud region, Python/Java/CUDA/Spark version, operating system, data store, customer tier or
schedule), or in two, the second always a wordy one (store, tier, schedule). Some families also
hold a wordy attribute fixed. Lessons name attributes the canonical way ("eu-west-1",
"Python 3.11", "Ubuntu 22.04", "BigQuery", "enterprise", "nightly"); about three questions in four
name the deciding attribute only in other words ("Ireland", "py311", "Jammy", "BQ", "large
accounts", "overnight", "EMR 7.0" for Spark 3.5), the rest literally, some with the attribute
first or the entity spaced or camel-cased. Questions are short and hurried, paraphrase the
problem, and target lessons spread evenly over the corpus. Each question's ``asks`` (scenario,
entity and the attributes it names, canonical) matches exactly one lesson's ``slots``; ``build``
checks that. Siblings never merge on save: every sibling has a word the others lack.
"""

from __future__ import annotations

import random
import re
from typing import Any, NamedTuple

from benchmarks.sets.data_platform_scenarios import SCENARIOS, Scenario
from benchmarks.sets.data_platform_vocab import (
    AREAS,
    CONTEXTS,
    COUNTS,
    DIMENSIONS,
    ENTITY_PATTERNS,
    GIGABYTES,
    MINUTES,
    TEAMS,
    THOUSANDS,
    VALUES,
    WORDY,
)

LITERAL_SHARE = 0.25  # questions that name the deciding attribute as the lesson does
ATTRIBUTE_FIRST_SHARE = 0.3  # paraphrased questions that put the attribute before the problem
FIXED_SHARE = 0.4  # families that also hold one wordy attribute fixed
TWO_DIM_SHARE = 0.25  # families whose siblings differ in two attributes
REGION_DAMPING = 0.5  # how often a family that could vary something else than the region does


class Family(NamedTuple):
    """One scenario on one entity; its siblings are the lessons at ``first`` .. ``first + size``."""

    scenario: Scenario
    entity: str
    varied: tuple[str, ...]
    fixed: dict[str, str]
    details: dict[str, Any]
    first: int
    size: int


def build(size: int, questions: int = 200, seed: int = 20261126) -> dict[str, list[dict]]:
    """{"lessons": [...], "questions": [...]}: ``size`` lessons and ``questions`` questions."""
    if size < 1 or not 0 <= questions <= size:
        raise ValueError(f"need size >= 1 and 0 <= questions <= size, got size={size}, questions={questions}")
    rng = random.Random(seed)
    lessons: list[dict] = []
    families: list[Family] = []
    pairs = _scenario_entities(rng)
    while len(lessons) < size:
        if not pairs:
            raise ValueError(f"the data-platform set holds at most {len(lessons)} lessons")
        scenario, entity = pairs.pop()
        family = _family(rng, scenario, entity, len(lessons), size - len(lessons))
        families.append(family)
        lessons.extend(_siblings(rng, family, len(families) - 1))
    owner = [f for f in families for _ in range(f.size)]
    asked = [
        _question(rng, f"dp-q{i:04d}", lessons[j], owner[j])
        for i, j in enumerate(_targets(rng, size, questions))
    ]
    check(lessons, asked)
    return {"lessons": lessons, "questions": asked}


def check(lessons: list[dict], questions: list[dict]) -> None:
    """Raise unless each question's ``asks`` matches its evidence lesson's slots and no other's."""
    by_family: dict[tuple[str, str], list[dict]] = {}
    for lesson in lessons:
        by_family.setdefault((lesson["slots"]["scenario"], lesson["slots"]["entity"]), []).append(lesson)
    for q in questions:
        asks = q["asks"]
        matches = [
            lesson["key"]
            for lesson in by_family.get((asks["scenario"], asks["entity"]), [])
            if all(lesson["slots"].get(k) == v for k, v in asks.items())
        ]
        if matches != q["evidence"]:
            raise AssertionError(f"question {q['id']} matches {matches}, not {q['evidence']}")


def _scenario_entities(rng: random.Random) -> list[tuple[Scenario, str]]:
    """Every (scenario, entity) pair once, shuffled: a family never repeats another's."""
    pairs = [
        (scenario, pattern.format(area))
        for scenario in SCENARIOS
        for pattern in ENTITY_PATTERNS[scenario.entity]
        for area in AREAS
    ]
    rng.shuffle(pairs)
    return pairs


def _pool(dim: str) -> list[str]:
    return list(VALUES[dim])


def _family(rng: random.Random, scenario: Scenario, entity: str, first: int, left: int) -> Family:
    """Pick how the siblings differ; the last families fill ``left`` exactly."""
    dims = scenario.dims
    wordy = [d for d in dims if d in WORDY]
    if left < 11:
        count = left if left <= 8 else 3
        varied: tuple[str, ...] = (_pick(rng, dims, count),)
    elif rng.random() < TWO_DIM_SHARE and len(wordy) >= 1:
        second = rng.choice(wordy)
        varied = (rng.choice([d for d in dims if d != second]), second)
        count = 0
    else:
        count = rng.randint(3, 8)
        varied = (_pick(rng, dims, count),)
    spare = [d for d in wordy if d not in varied]
    fixed = {}
    if spare and rng.random() < FIXED_SHARE:
        held = rng.choice(spare)
        fixed[held] = rng.choice(_pool(held))
    details: dict[str, Any] = {
        "m": rng.choice(MINUTES),
        "g": rng.choice(GIGABYTES),
        "c": rng.choice(COUNTS),
        "k": rng.choice(THOUSANDS),
        "p": rng.randrange(len(scenario.problems)),
        "r": rng.randrange(len(scenario.resolutions)),
        "context": _context(rng),
        "values": _values(rng, varied, count),
    }
    return Family(scenario, entity, varied, fixed, details, first, len(details["values"]))


def _pick(rng: random.Random, dims: tuple[str, ...], count: int) -> str:
    """A dimension with at least ``count`` values: region (in every scenario) less often, and
    versions (whose short pools fit fewer families) twice as often as the rest."""
    fits = [d for d in dims if len(VALUES[d]) >= count]
    others = [d for d in fits if d != "region"]
    choices = others if others and rng.random() < REGION_DAMPING else fits
    weights = [2 if DIMENSIONS[d][1] == "runtime" else 1 for d in choices]
    return rng.choices(choices, weights=weights)[0]


def _values(rng: random.Random, varied: tuple[str, ...], count: int) -> list[tuple[str, ...]]:
    """The siblings' values of the varied dimensions: ``count`` of one, or a small grid of two."""
    if len(varied) == 1:
        return [(v,) for v in rng.sample(_pool(varied[0]), count)]
    rows, cols = rng.choice([(2, 2), (2, 3), (3, 2), (2, 4), (4, 2)])
    return [(a, b) for a in rng.sample(_pool(varied[0]), rows) for b in rng.sample(_pool(varied[1]), cols)]


def _context(rng: random.Random) -> str | None:
    if rng.random() < 0.25:
        return None
    return rng.choice(CONTEXTS).format(team=rng.choice(TEAMS), t=rng.randrange(3000, 10000))


def _clause(dim: str, form: str) -> tuple[str, str]:
    """(clause, bare) for a form: "a|b" is written out, anything else goes into the dimension's clause."""
    if "|" in form:
        clause, bare = form.split("|")
        return clause, bare
    return DIMENSIONS[dim][0].format(form), form


def _ordered(attrs: dict[str, str]) -> list[tuple[str, str]]:
    """Attributes in the order lessons write them (region, runtime, os, store, tier, schedule)."""
    return sorted(attrs.items(), key=lambda item: list(DIMENSIONS).index(item[0]))


def _siblings(rng: random.Random, family: Family, number: int) -> list[dict]:
    """The family's lessons: the same words, each with its own attribute values."""
    scenario, details = family.scenario, family.details
    lessons = []
    for i, values in enumerate(details["values"]):
        attrs = dict(zip(family.varied, values, strict=True)) | family.fixed
        clauses = " ".join(_clause(d, VALUES[d][v][0])[0] for d, v in _ordered(attrs))
        fill = {k: details[k] for k in "mgck"} | {"e": family.entity, "a": clauses}
        slots = {"scenario": scenario.name, "entity": family.entity}
        slots |= {DIMENSIONS[d][1]: v for d, v in attrs.items()}
        lessons.append(
            {
                "key": f"dp-{number:05d}-{i}",
                "problem": scenario.problems[details["p"]].format(**fill),
                "resolution": scenario.resolutions[details["r"]].format(**fill),
                "context": details["context"],
                "tags": list(scenario.tags),
                "slots": slots,
            }
        )
    return lessons


def _targets(rng: random.Random, size: int, questions: int) -> list[int]:
    """One lesson from each of ``questions`` equal stretches of the corpus."""
    return [rng.randrange(i * size // questions, (i + 1) * size // questions) for i in range(questions)]


def _spaced(entity: str, rng: random.Random) -> str:
    """The entity written another way: spaced, camel-cased, or with the other separator."""
    words = [w for w in re.split(r"[_.\-]", entity) if w]
    other = "-" if "_" in entity else "_"
    return rng.choice([" ".join(words), "".join(w.capitalize() for w in words), other.join(words)])


def _forms(
    rng: random.Random, asked: list[tuple[str, str]], literal: bool
) -> tuple[list[tuple[str, str]], str]:
    """(clause, bare) per asked attribute, and the kind of the first paraphrased one."""
    forms, kind = [], ""
    for n, (dim, value) in enumerate(asked):
        surface, others = VALUES[dim][value]
        if literal or (n > 0 and rng.random() < 0.5):
            forms.append(_clause(dim, surface))
            continue
        form, form_kind = rng.choice(others)
        forms.append(_clause(dim, form))
        kind = kind or form_kind
    return forms, kind


def _question(rng: random.Random, qid: str, lesson: dict, family: Family) -> dict:
    """A short, hurried question whose attributes decide between the siblings."""
    varied = [(d, lesson["slots"][DIMENSIONS[d][1]]) for d in family.varied]
    extra = [(d, v) for d, v in family.fixed.items() if rng.random() < 0.3]
    literal = rng.random() < LITERAL_SHARE
    forms, kind = _forms(rng, varied + extra, literal)
    entity = family.entity
    if literal:
        kind = rng.choices(["literal", "word-order", "entity-spacing"], weights=[4, 3, 3])[0]
        entity = _spaced(entity, rng) if kind == "entity-spacing" else entity
    if rng.random() < 0.5:
        forms.reverse()
    template = rng.choice(family.scenario.questions)
    fill = {k: family.details[k] for k in "mgck"} | {"e": entity}
    if kind == "word-order" or (not literal and rng.random() < ATTRIBUTE_FIRST_SHARE):
        head = ", ".join(bare for _, bare in forms)
        text = head + rng.choice([": ", " - ", ", "]) + template.replace(" {a}", "").format(**fill)
    else:
        text = template.format(a=" ".join(clause for clause, _ in forms), **fill)
    asks = {"scenario": family.scenario.name, "entity": family.entity}
    asks |= {DIMENSIONS[d][1]: v for d, v in varied + extra}
    return {"id": qid, "text": text, "kind": kind, "evidence": [lesson["key"]], "asks": asks}
