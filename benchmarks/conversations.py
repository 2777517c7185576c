"""A conversational retrieval set: multi-session dialogs with dates, and questions about them.

Why: agents save what people tell them turn by turn and must later find the turns
that answer a question, including when something happened, facts spread over two
turns, and questions the conversation cannot answer. This generator writes such a
set from our own personas, storylines and templates (no public benchmark is used
or imitated), deterministically for a seed, so a ranking change is measured on the
same questions every time.

Shape:

- ``CONVERSATIONS`` dialogs, each between two or three people, of 14-18 dated
  sessions a few days to a few weeks apart. Each person lives through three or
  four *storylines* (adopting a pet, a new job, a trip, training for a race, an
  injury, ...), each told in two to four steps spread over the sessions, with
  relative time words ("yesterday", "last weekend") where something happened.
  Other participants react, ask follow-ups and make small talk, some of which
  touches the same topics without answering anything (hard negatives).
- Questions, each with the ids of the turns that hold the answer (``evidence``):
  ``single`` (one turn), ``temporal`` (when did it happen: the answer is a date
  worked out from the session date and the time words), ``time-anchored`` (a
  storyline repeats, e.g. two long runs or two restaurant visits, and only the
  month the question names tells which turn is meant), ``multi-hop`` (two turns,
  both evidence) and ``unanswerable`` (asked about someone the storyline did not
  happen to, or about something never mentioned; no evidence; ``trap`` lists the
  turns of the person it did happen to, when there are any).

Run ``python benchmarks/conversations.py`` to rewrite
``benchmarks/eval_data/conversations.json``; ``--check`` verifies that the
committed file is what the generator makes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

SEED = 20261124
CONVERSATIONS = 10
DATA_FILE = Path(__file__).resolve().parent / "eval_data" / "conversations.json"

PEOPLE = (
    "Maya Ben Chiara Dev Elena Farid Grace Hiro Isla Jonas Kemi Luis Marta Nikhil Olivia Pablo Quinn Rosa "
    "Sami Tess Umar Vera Wes Yara Zoe Ada Bruno Cleo Dario Effie"
).split()
MONTHS = "January February March April May June July August September October November December".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()


def long_date(day: date) -> str:
    """'9 March 2024': how dates appear in saved turns and in answers."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def month_year(day: date) -> str:
    return f"{MONTHS[day.month - 1]} {day.year}"


# -- when something happened, relative to the session it is told in -------------------------


def _last_weekday(today: date, weekday: int) -> date:
    """The most recent ``weekday`` strictly before ``today``."""
    back = (today.weekday() - weekday) % 7 or 7
    return today - timedelta(days=back)


WHEN: list[tuple[str, Any]] = [
    ("yesterday", lambda d: (d - timedelta(days=1), None)),
    ("this morning", lambda d: (d, None)),
    ("two days ago", lambda d: (d - timedelta(days=2), None)),
    ("last Saturday", lambda d: (_last_weekday(d, 5), None)),
    ("on Sunday", lambda d: (_last_weekday(d, 6), None)),
    ("last Friday", lambda d: (_last_weekday(d, 4), None)),
    ("last weekend", lambda d: (_last_weekday(d, 5), f"the weekend before {long_date(d)}")),
    ("last week", lambda d: (d - timedelta(days=7), f"the week before {long_date(d)}")),
]


def when_answer(phrase: str, session_day: date) -> str:
    for text, fn in WHEN:
        if text == phrase:
            day, vague = fn(session_day)
            return vague or f"{WEEKDAYS[day.weekday()]} {long_date(day)}"
    raise KeyError(phrase)


# -- storylines ---------------------------------------------------------------------------------

# A step is a few lines: (role, template, tag). role "owner" is the storyline's person,
# "peer" another participant, "reader" the recommended-to person of a recommendation.
# A tag names a line that questions use as evidence.
Line = tuple[str, str, str | None]


@dataclass
class Question:
    kind: str
    text: str
    answer: str
    tags: list[str]  # evidence lines of this storyline
    when: str | None = None  # tag whose date answers a temporal question
    month_of: str | None = None  # time-anchored: the tag whose month the question names


@dataclass
class Storyline:
    kind: str
    owner: str
    slots: dict[str, str]
    steps: list[list[Line]]
    questions: list[Question]
    # unanswerable: (question about someone else, answer) with "{who}" for that person
    swapped: list[str] = field(default_factory=list)
    reader: str | None = None
    repeated: bool = False  # steps tell the same kind of event twice (time-anchored questions)


def pick(rng: random.Random, pool: list[str], used: set[str]) -> str:
    """A value from ``pool`` not used yet in this conversation (so answers are unambiguous)."""
    free = [x for x in pool if x not in used] or pool
    value = rng.choice(free)
    used.add(value)
    return value


ANIMALS = [
    ("dog", "beagle"),
    ("dog", "greyhound"),
    ("dog", "border collie"),
    ("dog", "corgi mix"),
    ("cat", "grey tabby"),
    ("cat", "Maine Coon"),
    ("rabbit", "lop-eared rabbit"),
]
PET_NAMES = (
    "Biscuit Pepper Mochi Juniper Waffles Ziggy Olive Captain Noodle Clementine Pickles Sherlock".split()
)
SHELTERS = [
    "the Riverside animal shelter",
    "Happy Tails rescue",
    "a farm outside town",
    "the Northgate humane society",
    "a neighbour whose pet had a litter",
]
TRICKS = [
    ("to ring a bell by the door when she wants to go out", "ringing a bell"),
    ("to give a high five", "the high five"),
    ("to fetch the newspaper from the porch", "fetching the paper"),
    ("to sit and wait until I say go", "waiting on command"),
]


def pet(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    kind, breed = rng.choice(ANIMALS)
    name = pick(rng, PET_NAMES, used)
    shelter = pick(rng, SHELTERS, used)
    trick, trick_short = rng.choice(TRICKS)
    s = {"kind": kind, "breed": breed, "pet": name, "shelter": shelter, "trick": trick}
    adopt = rng.choice(
        [
            "Guess what, {when} we adopted a {kind} from {shelter}! We named her {pet}.",
            "Small life update: we brought home a {kind} {when}. She came from {shelter} and her name is {pet}.",
        ]
    )
    return Storyline(
        kind="pet",
        owner=owner,
        slots=s,
        steps=[
            [
                ("owner", adopt, "adopt"),
                ("peer", "No way, congratulations! What breed?", None),
                ("owner", "A {breed}, two years old and very shy.", "breed"),
                ("peer", "How is {pet} settling in?", None),
                (
                    "owner",
                    "She hid under the sofa for a day, but now she follows me from room to room.",
                    None,
                ),
            ],
            [
                (
                    "owner",
                    "Proud moment: {pet} finally learned {trick}. It took three weeks of treats.",
                    "trick",
                ),
                ("peer", "Ha, that is adorable. You have to send me a video.", None),
            ],
        ],
        questions=[
            Question("single", "What breed is {owner}'s {kind}?", "a {breed}", ["breed"]),
            Question("single", "Where did {owner} get {pet} from?", "{shelter}", ["adopt"]),
            Question(
                "temporal",
                "When did {owner} adopt {pet}?||When did {owner} get the {kind}?",
                "",
                ["adopt"],
                when="adopt",
            ),
            Question("single", "What has {owner}'s {kind} been trained to do?", "{trick}", ["trick"]),
            Question(
                "multi-hop",
                f"Where did the {{kind}} that learned {trick_short} come from, and what is its name?",
                "{pet}, from {shelter}",
                ["adopt", "trick"],
            ),
        ],
        swapped=["What is the name of {who}'s {kind}?", "Where did {who} adopt a {breed} from?"],
    )


COMPANIES = "Northwind Labs|Bluefin Analytics|Copperleaf Health|Tidewater Games|Sunbeam Robotics|Greystone Bank|Lumen Studio|Orbit Logistics".split(
    "|"
)
ROLES = [
    "data analyst",
    "product designer",
    "nurse manager",
    "backend engineer",
    "project coordinator",
    "UX researcher",
]
MANAGERS = "Henrike Moses Anjali Colm Ritu Desmond Ilse Tobias".split()
PERKS = [
    "offered a four-day work week",
    "pay for a language course",
    "let me bring my dog to the office",
    "have a proper mentoring program",
]
TEAMS = ["the data platform team", "payments", "the mobile squad", "internal tools", "the research group"]
TRAITS = [
    "does a walking one-on-one every Friday",
    "answers every message within minutes",
    "used to be a jazz drummer",
    "bans meetings on Wednesdays",
]


def job(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    s = {
        "company": pick(rng, COMPANIES, used),
        "role": rng.choice(ROLES),
        "manager": pick(rng, MANAGERS, used),
        "perk": rng.choice(PERKS),
        "trait": rng.choice(TRAITS),
        "team": rng.choice(TEAMS),
    }
    return Storyline(
        kind="job",
        owner=owner,
        slots=s,
        steps=[
            [
                (
                    "owner",
                    "I had my second interview at {company} {when}, for a {role} position. Fingers crossed.",
                    "interview",
                ),
                ("peer", "You will be great. Which team would it be?", None),
                ("owner", "{team_cap}, about twelve people. They seem nice.", "team"),
            ],
            [
                ("owner", "They called: {company} made me an offer and I said yes!", "offer"),
                ("peer", "Amazing!! What made you say yes in the end?", None),
                ("owner", "Honestly the team, and they {perk}.", "perk"),
            ],
            [
                ("peer", "How is the new job going?", None),
                ("owner", "Really well. My manager, {manager}, {trait}, which I love.", "manager"),
            ],
        ],
        questions=[
            Question("single", "Which company did {owner} interview with?", "{company}", ["interview"]),
            Question(
                "temporal", "When was {owner}'s second job interview?", "", ["interview"], when="interview"
            ),
            Question("single", "Why did {owner} accept the job offer?", "the team; they {perk}", ["perk"]),
            Question(
                "single",
                "Who is {owner}'s manager at the new job?||Who does {owner} report to now?",
                "{manager}",
                ["manager"],
            ),
            Question("single", "Which team did {owner} interview for?", "{team}", ["team"]),
            Question(
                "multi-hop",
                "What position did {owner} interview for, and who became their manager?",
                "{role}; {manager}",
                ["interview", "manager"],
            ),
        ],
        swapped=["Which company offered {who} a job?", "Who is {who}'s manager at {company}?"],
    )


PLACES = [
    ("Lisbon", "a tram ride up to the castle at sunset", "custard tarts"),
    ("Kyoto", "walking through the bamboo grove before the crowds", "cold soba"),
    ("Oaxaca", "a mezcal tasting in a tiny village", "mole negro"),
    ("Edinburgh", "climbing Arthur's Seat in the rain", "cullen skink"),
    ("Hanoi", "a street food tour on scooters", "bun cha"),
    ("Reykjavik", "snorkelling between two tectonic plates", "lamb soup"),
    ("Tbilisi", "the sulphur baths in the old town", "khachapuri"),
    ("Seville", "a flamenco show in a tiny courtyard", "salmorejo"),
]
COMPANIONS = "my partner|my sister|my college roommate|my dad|two friends from work".split("|")


def trip(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    place, highlight, dish = rng.choice([p for p in PLACES if p[0] not in used] or PLACES)
    used.add(place)
    s = {"place": place, "highlight": highlight, "dish": dish, "companion": rng.choice(COMPANIONS)}
    return Storyline(
        kind="trip",
        owner=owner,
        slots=s,
        steps=[
            [
                (
                    "owner",
                    "We finally booked flights to {place}! Ten days in the spring.",
                    "plan",
                ),
                ("peer", "So jealous. Who is going with you?", None),
                ("owner", "{companion_cap}. First trip together in ages.", "companion"),
            ],
            [
                ("owner", "We got back from {place} {when}. The highlight was {highlight}.", "return"),
                ("peer", "That sounds unreal. And the food?", None),
                ("owner", "I still dream about the {dish}. We ate it almost every day.", "dish"),
            ],
        ],
        questions=[
            Question("single", "Who did {owner} travel to {place} with?", "{companion}", ["companion"]),
            Question("temporal", "When did {owner} return from {place}?", "", ["return"], when="return"),
            Question("single", "What was the best part of {owner}'s trip?", "{highlight}", ["return"]),
            Question(
                "single", "Which dish did {owner} fall in love with while travelling?", "{dish}", ["dish"]
            ),
            Question(
                "multi-hop",
                "Who went to {place} with {owner}, and what was the highlight?",
                "{companion}; {highlight}",
                ["companion", "return"],
            ),
        ],
        swapped=["What food did {who} love in {place}?", "When did {who} get back from {place}?"],
    )


RACES = [
    "the Harbour City half marathon",
    "the Lakeside 10K trail race",
    "the Autumn Ridge marathon",
    "the spring sprint triathlon",
]
FEELINGS = ["legs felt like lead", "felt surprisingly easy", "had to walk the last hill", "negative splits"]


def race(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    first, second = sorted(rng.sample([8, 11, 14, 16, 18, 21, 24, 27, 30], 2))
    s = {
        "race": pick(rng, RACES, used),
        "km1": str(first),
        "km2": str(second),
        "feel1": rng.choice(FEELINGS),
        "feel2": rng.choice(FEELINGS),
        "time": f"{rng.randint(1, 3)}:{rng.randint(0, 59):02d}",
        "goal": rng.choice(["two hours", "fifty minutes", "four and a half hours", "ninety minutes"]),
    }
    return Storyline(
        kind="race",
        owner=owner,
        slots=s,
        repeated=True,
        steps=[
            [
                ("owner", "I did something impulsive: I signed up for {race}.", "signup"),
                ("peer", "You are braver than me. What is the goal?", None),
                ("owner", "Anything under {goal} would make me happy.", "goal"),
            ],
            [("owner", "Training update: my long run {when} was {km1} km, {feel1}.", "run1")],
            [
                ("owner", "Another training update: my long run {when} was {km2} km, {feel2}.", "run2"),
                ("peer", "You are really going for it. Proud of you.", None),
            ],
            [
                ("owner", "I did it! I finished {race} in {time}.", "finish"),
                ("peer", "Incredible, congratulations! Are you going to sign up for another one?", None),
            ],
        ],
        questions=[
            Question("single", "Which race did {owner} enter?", "{race}", ["signup"]),
            Question(
                "time-anchored",
                "How far was {owner}'s long training run in {month}?",
                "{km1} km",
                ["run1"],
                month_of="run1",
            ),
            Question(
                "time-anchored",
                "How far was {owner}'s long training run in {month}?",
                "{km2} km",
                ["run2"],
                month_of="run2",
            ),
            Question("single", "What was {owner}'s finishing time?", "{time}", ["finish"]),
            Question("single", "What time was {owner} hoping to beat in the race?", "{goal}", ["goal"]),
            Question("temporal", "When did {owner} run {km2} km?", "", ["run2"], when="run2"),
            Question(
                "multi-hop",
                "By how many kilometres did {owner}'s long training run grow between the two updates?",
                "from {km1} km to {km2} km",
                ["run1", "run2"],
            ),
        ],
        swapped=["What was {who}'s finishing time in {race}?", "How long was {who}'s longest training run?"],
    )


INSTRUMENTS = ["cello", "ukulele", "piano", "drums", "violin", "saxophone"]
TEACHERS = (
    "Mrs Albescu|a retired session player called Lenny|Dr Okonkwo|a student named Pim|Ms Haraldsen".split("|")
)
PIECES = ["a Bach minuet", "'Blackbird'", "a bossa nova standard", "the theme from an old video game"]
VENUES = ["the library's open mic night", "a community hall recital", "my cousin's birthday party"]


def music(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    s = {
        "instrument": pick(rng, INSTRUMENTS, used),
        "teacher": pick(rng, TEACHERS, used),
        "piece": rng.choice(PIECES),
        "venue": pick(rng, VENUES, used),
        "day": rng.choice(["Monday", "Tuesday", "Thursday", "Friday"]),
    }
    return Storyline(
        kind="music",
        owner=owner,
        slots=s,
        steps=[
            [
                ("owner", "I finally started {instrument} lessons. My teacher is {teacher}.", "lessons"),
                (
                    "peer",
                    "I tried an instrument as a kid and gave up after a month. How often do you go?",
                    None,
                ),
                ("owner", "Every {day} after work, forty-five minutes.", "day"),
            ],
            [
                (
                    "owner",
                    "I played {piece} at {venue} {when}. My hands were shaking the whole time.",
                    "perform",
                ),
                ("peer", "Everyone gets nervous. I bet it sounded lovely.", None),
            ],
        ],
        questions=[
            Question("single", "Which instrument is {owner} learning?", "{instrument}", ["lessons"]),
            Question("single", "Who teaches {owner} music?", "{teacher}", ["lessons"]),
            Question("single", "On which day are {owner}'s music lessons?", "{day}", ["day"]),
            Question("temporal", "When did {owner} perform at {venue}?", "", ["perform"], when="perform"),
            Question("single", "What piece did {owner} play in public?", "{piece}", ["perform"]),
            Question(
                "multi-hop",
                "What instrument did {owner} perform on at {venue}, and what did they play?",
                "{instrument}; {piece}",
                ["lessons", "perform"],
            ),
        ],
        swapped=["Which instrument does {who} play?", "What did {who} play at {venue}?"],
    )


AREAS = ["Eastwick", "the Old Town", "Maple Heights", "Harbourside", "Greenfield", "Upper Mill"]
REASONS = [
    "the commute is killing me",
    "the landlord is selling the building",
    "we need a room for the baby",
    "I want to be near my parents",
]
FEATURES = [
    "a tiny balcony with a view of the river",
    "a spare room that is now my studio",
    "a bakery right downstairs",
    "a garden with an old apple tree",
]


def move(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    origin, target = rng.sample([a for a in AREAS if a not in used] or AREAS, 2)
    used.update({origin, target})
    s = {
        "from": origin,
        "to": target,
        "reason": rng.choice(REASONS),
        "feature": rng.choice(FEATURES),
        "rooms": rng.choice(["Two", "Three", "Four"]),
    }
    return Storyline(
        kind="move",
        owner=owner,
        slots=s,
        steps=[
            [
                (
                    "owner",
                    "Big news: we are moving from {from} to {to} next month, because {reason}.",
                    "announce",
                ),
                (
                    "peer",
                    "Moving is the worst, but that sounds like the right call. How big is the new place?",
                    None,
                ),
                ("owner", "{rooms} bedrooms, and somehow cheaper than what we pay now.", "rooms"),
            ],
            [
                ("owner", "We are finally unpacked in {to}. The best part is {feature}.", "unpacked"),
                ("peer", "Sounds dreamy. Housewarming party when?", None),
            ],
        ],
        questions=[
            Question("single", "Which neighbourhood did {owner} move to?", "{to}", ["announce"]),
            Question("single", "Why did {owner} decide to move house?", "{reason}", ["announce"]),
            Question("single", "What does {owner} like most about the new home?", "{feature}", ["unpacked"]),
            Question("single", "How many bedrooms does {owner}'s new home have?", "{rooms}", ["rooms"]),
            Question(
                "multi-hop",
                "Where did {owner} move from, and what is the best thing about the new place?",
                "from {from}; {feature}",
                ["announce", "unpacked"],
            ),
        ],
        swapped=["Why did {who} move to {to}?", "What does {who} like about living in {to}?"],
    )


RELATIVES = ["sister", "brother", "cousin", "best friend"]
REL_NAMES = "Ottilie|Rafael|Josie|Marcus|Leonie|Teodor".split("|")
VENUE_TOWNS = [
    "a vineyard near Porto",
    "a lighthouse on the coast",
    "her grandmother's farm",
    "a tiny chapel in Galway",
]
GIFTS = [
    "a hand-painted tea set",
    "a weekend in a cabin",
    "a framed map of where they met",
    "a sourdough starter",
]
DETAILS = [
    "It rained all day and nobody cared",
    "The groom cried through the vows",
    "The dog was the ring bearer",
]


def wedding(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    s = {
        "relative": rng.choice(RELATIVES),
        "relname": pick(rng, REL_NAMES, used),
        "venue": pick(rng, VENUE_TOWNS, used),
        "gift": rng.choice(GIFTS),
        "detail": rng.choice(DETAILS),
        "duty": rng.choice(
            ["the officiant", "in charge of the music", "the one giving the toast", "the photographer"]
        ),
    }
    return Storyline(
        kind="wedding",
        owner=owner,
        slots=s,
        steps=[
            [
                ("owner", "My {relative} {relname} is getting married, at {venue} of all places!", "engaged"),
                ("peer", "Oh how lovely. Do you have a job on the day?", None),
                ("owner", "Yes, I am {duty}. Terrified.", "duty"),
            ],
            [
                ("owner", "{relname}'s wedding was {when}. {detail}. We gave them {gift}.", "wedding"),
                ("peer", "What a day. That gift is so thoughtful.", None),
            ],
        ],
        questions=[
            Question("single", "Where did {owner}'s {relative} get married?", "{venue}", ["engaged"]),
            Question("temporal", "When was {relname}'s wedding?", "", ["wedding"], when="wedding"),
            Question("single", "What wedding present did {owner} give?", "{gift}", ["wedding"]),
            Question("single", "What role did {owner} have at {relname}'s wedding?", "{duty}", ["duty"]),
            Question(
                "multi-hop",
                "Who close to {owner} got married, and what did {owner} give them?",
                "{owner}'s {relative} {relname}; {gift}",
                ["engaged", "wedding"],
            ),
        ],
        swapped=[
            "What did {who} give {relname} as a wedding present?",
            "Where did {who}'s {relative} get married?",
        ],
    )


BOOKS = [
    ("The Salt Road", "Imogen Vale", "a caravan crossing a desert in the 1300s", "desert caravans"),
    (
        "Glass Orchard",
        "Tomas Reyes",
        "a family that grows fruit under greenhouses in Iceland",
        "greenhouse farming",
    ),
    (
        "Nine Winters",
        "Adaeze Obi",
        "a lighthouse keeper who writes letters to no one",
        "a lonely lighthouse keeper",
    ),
    (
        "The Cartographer's Daughter",
        "Lise Moreau",
        "a girl who maps a city that keeps changing",
        "map-making",
    ),
    ("Small Hours", "Bram Kessler", "night-shift nurses in a Rotterdam hospital", "night-shift nurses"),
]
OPINIONS = [
    "I cried on the train reading the last chapter",
    "the middle dragged, but the ending made up for it",
    "I stayed up until 2 am to finish it",
    "honestly it was not for me",
]


def book(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    title, author, premise, premise_short = rng.choice([b for b in BOOKS if b[0] not in used] or BOOKS)
    used.add(title)
    s = {
        "pages": rng.choice(["About three hundred", "Nearly six hundred", "Barely two hundred"]),
        "book": title,
        "author": author,
        "premise": premise,
        "topic": premise_short,
        "opinion": rng.choice(OPINIONS),
    }
    return Storyline(
        kind="book",
        owner=owner,
        slots=s,
        steps=[
            [
                (
                    "owner",
                    "{reader}, you should read {book} by {author}. It is about {premise}.",
                    "recommend",
                ),
                ("reader", "Adding it to my list right now. Is it long?", None),
                ("owner", "{pages} pages, but it flies by.", "pages"),
            ],
            [
                ("reader", "I finished {book}. {opinion_cap}.", "review"),
                ("owner", "I knew you would have feelings about it!", None),
            ],
        ],
        questions=[
            Question("single", "Which book did {owner} recommend to {reader}?", "{book}", ["recommend"]),
            Question("single", "Who wrote the book {owner} recommended?", "{author}", ["recommend"]),
            Question(
                "single", "How many pages is the book {owner} suggested to {reader}?", "{pages}", ["pages"]
            ),
            Question("single", "What did {reader} think of {book}?", "{opinion}", ["review"]),
            Question(
                "multi-hop",
                "What did {reader} make of the novel about {topic} that {owner} suggested?",
                "{opinion}",
                ["recommend", "review"],
            ),
        ],
        swapped=["Which book did {who} recommend to {reader}?"],
    )


RESTAURANTS = ["Casa Luz", "Pho Minh", "The Copper Pot", "Little Olive", "Sora Ramen", "Bistro Anouk"]
DISHES = ["slow-cooked lamb", "crab linguine", "mushroom risotto", "duck dumplings", "tasting menu"]
OCCASIONS = ["our anniversary", "my mum's birthday", "a work dinner", "a friend's promotion"]


def restaurants(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    first, second = (pick(rng, RESTAURANTS, used) for _ in range(2))
    dish1, dish2 = rng.sample(DISHES, 2)
    s = {
        "rest1": first,
        "rest2": second,
        "dish1": dish1,
        "dish2": dish2,
        "occasion": rng.choice(OCCASIONS),
        "price": rng.choice(["forty pounds", "twenty-five pounds", "sixty pounds"]),
    }
    return Storyline(
        kind="restaurant",
        owner=owner,
        slots=s,
        repeated=True,
        steps=[
            [
                (
                    "owner",
                    "We tried {rest1} {when}. I had the {dish1}, the best thing I have eaten all year.",
                    "visit1",
                ),
                ("peer", "Okay, I am booking a table. Was it expensive?", None),
                ("owner", "Around {price} a head with wine. Worth it.", "price"),
            ],
            [
                (
                    "owner",
                    "We went to {rest2} {when} for {occasion}. I ordered the {dish2}; pretty disappointing.",
                    "visit2",
                ),
                ("peer", "Shame. At least the company was good?", None),
            ],
        ],
        questions=[
            Question(
                "time-anchored",
                "Which restaurant did {owner} try in {month}?",
                "{rest1}",
                ["visit1"],
                month_of="visit1",
            ),
            Question(
                "time-anchored",
                "Which restaurant did {owner} go to in {month}?",
                "{rest2}",
                ["visit2"],
                month_of="visit2",
            ),
            Question("single", "What did {owner} order at {rest2}?", "{dish2}", ["visit2"]),
            Question("single", "How much did {owner} pay per person at {rest1}?", "{price}", ["price"]),
            Question("temporal", "When did {owner} eat at {rest1}?", "", ["visit1"], when="visit1"),
            Question(
                "multi-hop",
                "Which of {owner}'s two restaurant visits went better, and what was the dish there?",
                "{rest1}, the {dish1}",
                ["visit1", "visit2"],
            ),
        ],
        swapped=["What did {who} order at {rest1}?", "Which restaurant did {who} go to for {occasion}?"],
    )


TRAILS = [("Eagle Ridge", 14), ("the Cedar Falls loop", 9), ("Mount Tamsin", 19), ("the Old Quarry path", 7)]
HIKE_MATES = ["my neighbour Ivo", "the hiking club", "my brother", "my partner"]


def hikes(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    (t1, k1), (t2, k2) = rng.sample([t for t in TRAILS if t[0] not in used] or TRAILS, 2)
    used.update({t1, t2})
    s = {"trail1": t1, "trail2": t2, "k1": str(k1), "k2": str(k2), "mate": rng.choice(HIKE_MATES)}
    longer = t1 if k1 > k2 else t2
    return Storyline(
        kind="hike",
        owner=owner,
        slots=s,
        repeated=True,
        steps=[
            [
                ("owner", "I hiked {trail1} {when}, {k1} km. My calves are still complaining.", "hike1"),
                ("peer", "The views up there must be worth it.", None),
            ],
            [
                ("owner", "I went up {trail2} {when} with {mate}. {k2} km, and we saw a fox.", "hike2"),
                ("peer", "A fox! Did you get a picture?", None),
            ],
        ],
        questions=[
            Question(
                "time-anchored",
                "Which trail did {owner} hike in {month}?",
                "{trail1}",
                ["hike1"],
                month_of="hike1",
            ),
            Question(
                "time-anchored",
                "Which trail did {owner} hike in {month}?",
                "{trail2}",
                ["hike2"],
                month_of="hike2",
            ),
            Question("single", "Who went hiking with {owner} when they saw a fox?", "{mate}", ["hike2"]),
            Question(
                "multi-hop",
                "Which was the longer of {owner}'s two hikes?",
                f"{longer}",
                ["hike1", "hike2"],
            ),
        ],
        swapped=["Which trail did {who} hike with {mate}?"],
    )


INJURIES = [
    ("ankle", "basketball", "play"),
    ("wrist", "climbing", "climb"),
    ("knee", "five-a-side football", "play"),
]
PHYSIOS = ["Annika", "Joel", "Priyanka", "Stellan"]


def injury(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    part, sport, verb = rng.choice(INJURIES)
    s = {
        "part": part,
        "sport": sport,
        "verb": verb,
        "physio": pick(rng, PHYSIOS, used),
        "weeks": str(rng.randint(2, 8)),
        "clinic": rng.choice(
            ["the walk-in centre on Grove Street", "St Anne's hospital", "a sports clinic near work"]
        ),
    }
    return Storyline(
        kind="injury",
        owner=owner,
        slots=s,
        steps=[
            [
                ("owner", "I sprained my {part} at {sport} {when}. So annoying.", "sprain"),
                ("peer", "Ouch. Did you get it looked at?", None),
                ("owner", "X-ray at {clinic}. Nothing broken, thankfully.", "xray"),
            ],
            [
                (
                    "owner",
                    "Physio update: {physio} says {weeks} more weeks before I can {verb} again.",
                    "physio",
                ),
                ("peer", "That is not too bad. Slowly does it.", None),
            ],
        ],
        questions=[
            Question("single", "How did {owner} get hurt?", "spraining their {part} at {sport}", ["sprain"]),
            Question("temporal", "When did {owner} sprain their {part}?", "", ["sprain"], when="sprain"),
            Question(
                "single",
                "Where was {owner}'s injury X-rayed?||Where did {owner} get the scan?",
                "{clinic}",
                ["xray"],
            ),
            Question(
                "single",
                "How long did the physio say {owner} must wait before doing sport again?",
                "{weeks} weeks",
                ["physio"],
            ),
            Question(
                "multi-hop",
                "What sport injured {owner}, and who is treating them?",
                "{sport}; {physio}",
                ["sprain", "physio"],
            ),
        ],
        swapped=["Which body part did {who} injure?", "Who is {who}'s physio?"],
    )


ORGS = ["the food bank", "an animal rescue", "the community garden", "a literacy program for adults"]
EVENTS = ["bake sale", "charity quiz night", "sponsored walk", "book fair"]


def volunteer(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    s = {
        "org": pick(rng, ORGS, used),
        "weekday": rng.choice(["Tuesday", "Wednesday", "Thursday", "Saturday"]),
        "event": pick(rng, EVENTS, used),
        "amount": f"{rng.choice([640, 1200, 2350, 3100, 4800])} pounds",
        "task": rng.choice(
            ["sorting donations", "walking the dogs", "helping with the accounts", "running the front desk"]
        ),
    }
    return Storyline(
        kind="volunteer",
        owner=owner,
        slots=s,
        steps=[
            [
                ("owner", "I have started volunteering at {org} every {weekday} evening.", "start"),
                ("peer", "That is such a good way to spend an evening. What do you do there?", None),
                ("owner", "Mostly {task}. Low glamour, high satisfaction.", "task"),
            ],
            [
                ("owner", "The {event} we ran for {org} {when} raised {amount}!", "event"),
                ("peer", "Wow, that is way more than I expected.", None),
            ],
        ],
        questions=[
            Question("single", "Where does {owner} volunteer?", "{org}", ["start"]),
            Question("single", "What does {owner} do as a volunteer?", "{task}", ["task"]),
            Question("single", "On which day of the week does {owner} volunteer?", "{weekday}", ["start"]),
            Question("single", "How much money did the {event} raise?", "{amount}", ["event"]),
            Question("temporal", "When was the {event}?", "", ["event"], when="event"),
            Question(
                "multi-hop",
                "How much did the fundraiser raise for the place {owner} volunteers at on {weekday}s?",
                "{amount}",
                ["start", "event"],
            ),
        ],
        swapped=["Where does {who} volunteer on {weekday}s?"],
    )


COURSES = [
    ("an evening course in accounting", "level 2 bookkeeping exam"),
    ("an online Spanish course", "B1 speaking exam"),
    ("a first-aid instructor course", "practical assessment"),
    ("a cloud architecture certification", "associate exam"),
]
SCORES = ["87 percent", "a distinction", "91 out of 100", "full marks on the practical part"]
METHODS = ["Flashcards on the bus", "Studying with a group on Sundays", "Doing one past paper a day"]


def course(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    name, exam = rng.choice([c for c in COURSES if c[0] not in used] or COURSES)
    used.add(name)
    s = {
        "course": name,
        "exam": exam,
        "score": rng.choice(SCORES),
        "method": rng.choice(METHODS),
        "where": rng.choice(["Riverside College", "the adult education centre", "the city library"]),
    }
    return Storyline(
        kind="course",
        owner=owner,
        slots=s,
        steps=[
            [
                ("owner", "I enrolled in {course}. The {exam} is the scary part.", "enrol"),
                ("peer", "You have got this. Is it online?", None),
                ("owner", "No, two evenings a week at {where}.", "where"),
            ],
            [
                ("owner", "I passed the {exam} {when} with {score}! {method} really paid off.", "pass"),
                ("peer", "Knew it. Celebration drinks on me.", None),
            ],
        ],
        questions=[
            Question("single", "What course did {owner} sign up for?", "{course}", ["enrol"]),
            Question("single", "Where does {owner} attend classes?", "{where}", ["where"]),
            Question("single", "What result did {owner} get on the exam?", "{score}", ["pass"]),
            Question("temporal", "When did {owner} pass the {exam}?", "", ["pass"], when="pass"),
            Question(
                "multi-hop",
                "What was {owner} studying, and how did they prepare for the exam?",
                "{course}; {method}",
                ["enrol", "pass"],
            ),
        ],
        swapped=["What score did {who} get on the {exam}?"],
    )


BUILDS = [
    ("a bookshelf", "bookshelf", "my daughter's room", "their daughter's room", "reclaimed oak"),
    ("a birdhouse", "birdhouse", "the balcony", "the balcony", "cedar offcuts"),
    ("a garden bench", "bench", "my parents' anniversary", "their parents' anniversary", "larch"),
    ("a standing desk", "desk", "my home office", "their home office", "birch plywood"),
]


def build(rng: random.Random, owner: str, used: set[str]) -> Storyline:
    thing, short, purpose, their_purpose, material = rng.choice(
        [b for b in BUILDS if b[0] not in used] or BUILDS
    )
    used.add(thing)
    s = {
        "thing": thing,
        "short": short,
        "purpose": purpose,
        "their_purpose": their_purpose,
        "material": material,
        "hours": str(rng.randint(9, 40)),
        "lender": rng.choice(["my neighbour Sol", "my uncle", "the tool library", "a colleague"]),
    }
    return Storyline(
        kind="build",
        owner=owner,
        slots=s,
        steps=[
            [
                ("owner", "New weekend project: I am building {thing} for {purpose}.", "start"),
                ("peer", "Look at you. Do you even have the tools?", None),
                ("owner", "I borrowed a mitre saw from {lender}.", "lender"),
            ],
            [
                (
                    "owner",
                    "The {short} is done! I used {material}, and it took {hours} hours in the end.",
                    "done",
                ),
                ("peer", "That looks like it came from a shop. Seriously impressive.", None),
            ],
        ],
        questions=[
            Question("single", "What is {owner} making for {their_purpose}?", "{thing}", ["start"]),
            Question("single", "What wood did {owner} use?", "{material}", ["done"]),
            Question("single", "Who lent {owner} a saw?", "{lender}", ["lender"]),
            Question(
                "multi-hop",
                "Who or what was {owner}'s woodworking project for, and how many hours did it take?",
                "{their_purpose}; {hours} hours",
                ["start", "done"],
            ),
        ],
        swapped=["What did {who} build for {their_purpose}?"],
    )


STORYLINES = [
    pet,
    job,
    trip,
    race,
    music,
    move,
    wedding,
    book,
    restaurants,
    hikes,
    injury,
    volunteer,
    course,
    build,
]
REPEATED = {"race", "restaurant", "hike"}

# Asked about a participant; never part of any storyline.
ABSENT = [
    "What car did {who} buy?",
    "Which board game does {who} play most?",
    "What tattoo did {who} get?",
    "Where did {who} go surfing?",
    "Which podcast does {who} host?",
    "What did {who} plant in the allotment?",
    "Which chess tournament did {who} enter?",
    "What did {who} name their sailing boat?",
]

GREETINGS = [
    "Hey {peer}! How has your week been?",
    "Hi {peer}, long time no chat!",
    "Morning {peer}! Got a minute?",
    "{peer}! I was just thinking about you.",
]
GREETING_REPLIES = [
    "Busy, but good. You?",
    "Hey! Honestly a bit chaotic, but fine.",
    "Always, go on.",
    "Ha, good timing, I just sat down with a coffee.",
]
SMALL_TALK = [
    ("Work has been relentless this month.", "Same here. Everyone wants everything yesterday."),
    ("Did you watch the match last night?", "Only the second half. What a finish though."),
    ("The weather has been so grey lately.", "I know, I have forgotten what the sun looks like."),
    ("I have been trying to cook more at home.", "Good plan. I keep ordering takeaway, it is a problem."),
    ("My phone screen cracked again.", "Time for a case, my friend."),
    ("I binged that new detective series at the weekend.", "No spoilers, I am two episodes in."),
    ("I have been sleeping terribly.", "Try no screens after ten. It helped me a bit."),
    ("Traffic on the ring road was a nightmare today.", "That is why I cycle now."),
    ("Have you tried that new coffee place by the station?", "Yes, the oat flat white is dangerous."),
    ("My sister keeps sending me memes at 3 am.", "Siblings are a special kind of chaos."),
    ("I finally cleaned out the garage.", "Did you find anything good in there?"),
    ("The kids have a school play next week.", "Oh cute, what are they performing?"),
    ("I need new headphones, mine only work on one side.", "The ones I have were cheap and they are fine."),
    ("Our heating broke again.", "Ugh, in this weather? Hope it gets fixed fast."),
    ("I have been doing a crossword every morning.", "I can never get past the first few clues."),
    ("Is it just me or is everything more expensive lately?", "It is not just you. My grocery bill doubled."),
    ("I started drinking more water, apparently that is my personality now.", "Ha, hydration era."),
    (
        "My laptop decided to update itself in the middle of a call.",
        "Classic. Mine does that before every deadline.",
    ),
    ("We had a power cut last night, played cards by candlelight.", "That sounds kind of nice, actually."),
    ("I think I am finally getting a cold.", "Lots of tea and honey. Feel better."),
    ("Someone at work brought in homemade brownies.", "The best kind of coworker."),
    (
        "I rearranged the living room furniture, it feels like a new flat.",
        "I love doing that. Cheapest makeover.",
    ),
    ("Did you see the full moon last night?", "I missed it, too cloudy here."),
    ("My neighbour's cockatoo learned to imitate my doorbell.", "That is both hilarious and terrible."),
    ("I have been listening to a lot of old nineties music.", "Same, nostalgia is a strong drug."),
]
# Small talk that touches a storyline's topic without answering anything about it.
TOPIC_TALK = {
    "pet": [
        "I have always wanted a dog, but my landlord says no pets.",
        "My aunt's cat just turned eighteen.",
    ],
    "job": [
        "My company is hiring too, though the interviews are endless.",
        "I keep thinking about changing jobs.",
    ],
    "trip": ["I have not been on a proper holiday in two years.", "We might do a road trip in the summer."],
    "race": ["I tried running once and lasted ten minutes.", "There is a fun run near us every spring."],
    "music": ["My neighbour practises trumpet at 7 am. Every day.", "I still have my old guitar somewhere."],
    "move": [
        "Rents around here are ridiculous now.",
        "We repainted the living room, that is enough change for me.",
    ],
    "wedding": ["I have three weddings to go to this year.", "My parents renewed their vows last spring."],
    "book": ["I have not finished a book in months.", "I am more of an audiobook person these days."],
    "restaurant": [
        "There is a new place on our street, always packed.",
        "I only eat at places with a lunch deal.",
    ],
    "hike": ["I prefer my hills flat, thank you.", "The hiking boots I bought are still in the box."],
    "injury": [
        "My back has been stiff since I moved the sofa.",
        "I pulled a muscle at yoga once, never again.",
    ],
    "volunteer": ["I keep meaning to give blood.", "Our school is always looking for reading helpers."],
    "course": ["I signed up for a course once and never logged in.", "Exams still give me nightmares."],
    "build": ["I cannot even put flat-pack furniture together.", "My grandad built our kitchen table."],
}
CLOSINGS = [
    ("Anyway, I should go. Talk soon!", "Bye! Say hi to everyone."),
    ("Right, dinner time. Catch you later.", "Later!"),
]


# -- assembling a conversation -----------------------------------------------------------------


@dataclass
class Turn:
    id: str
    speaker: str
    text: str


@dataclass
class Session:
    id: str
    number: int
    date: str  # ISO date
    time: str  # HH:MM, local
    turns: list[Turn] = field(default_factory=list)


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


def _values(story: Storyline, peer: str, when: str = "") -> dict[str, str]:
    values = {**story.slots, "owner": story.owner, "peer": peer, "reader": story.reader or peer, "when": when}
    values.update({f"{k}_cap": v[:1].upper() + v[1:] for k, v in list(values.items())})
    return values


class ConversationBuilder:
    """One dialog: participants, their storylines placed over dated sessions, and questions."""

    def __init__(self, rng: random.Random, number: int, people: list[str]) -> None:
        self.rng = rng
        self.id = f"c{number:02d}"
        self.people = people
        self.used: set[str] = set()
        self.stories: list[Storyline] = []
        self.tagged: dict[tuple[int, str], tuple[str, date]] = {}  # (story, tag) -> (turn id, session day)
        self.when_phrase: dict[tuple[int, str], str] = {}

    def plan(self, sessions: int) -> None:
        rng = self.rng
        kinds = list(STORYLINES)
        rng.shuffle(kinds)
        # At least two storylines that repeat (time-anchored questions) per conversation.
        repeated = [k for k in kinds if k.__name__ in {"race", "restaurants", "hikes"}]
        others = [k for k in kinds if k not in repeated]
        per_person = 4 if len(self.people) == 2 else 3
        chosen = repeated[:2] + others[: len(self.people) * per_person - 2]
        rng.shuffle(chosen)
        for i, make in enumerate(chosen):
            owner = self.people[i % len(self.people)]
            story = make(rng, owner, self.used)
            if story.kind == "book":
                story.reader = rng.choice([p for p in self.people if p != owner])
            self.stories.append(story)
        self.sessions = sessions
        self.placement: dict[int, list[tuple[int, int]]] = {s: [] for s in range(sessions)}
        for index, story in enumerate(self.stories):
            steps = len(story.steps)
            gap = max(1, (sessions - 1) // steps)
            start = rng.randint(0, max(0, sessions - 1 - (steps - 1) * gap))
            at = start
            for step in range(steps):
                self.placement[min(at, sessions - 1)].append((index, step))
                at += rng.randint(max(1, gap - 1), gap + 1) if step < steps - 1 else 0
            # keep steps in order even when clipped at the last session
        for s in self.placement:
            self.placement[s].sort(key=lambda pair: (pair[0], pair[1]))

    def render(self, start: date) -> list[Session]:
        rng = self.rng
        sessions: list[Session] = []
        day = start
        for number in range(self.sessions):
            session = Session(
                id=f"{self.id}-s{number + 1:02d}",
                number=number + 1,
                date=day.isoformat(),
                time=f"{rng.choice([8, 12, 13, 18, 19, 20, 21])}:{rng.choice(['00', '15', '30', '45'])}",
            )
            self._session(session, day)
            sessions.append(session)
            day += timedelta(days=rng.randint(4, 24))
        return sessions

    def _say(self, session: Session, speaker: str, text: str) -> str:
        turn = Turn(id=f"{session.id}-t{len(session.turns) + 1:02d}", speaker=speaker, text=text)
        session.turns.append(turn)
        return turn.id

    def _session(self, session: Session, day: date) -> None:
        rng = self.rng
        opener = rng.choice(self.people)
        peer = rng.choice([p for p in self.people if p != opener])
        self._say(session, opener, rng.choice(GREETINGS).format(peer=peer))
        self._say(session, peer, rng.choice(GREETING_REPLIES))
        if len(self.people) > 2:
            third = next(p for p in self.people if p not in (opener, peer))
            self._say(session, third, "Hi both! Mind if I jump in?")
        steps = self.placement[session.number - 1]
        chatter = rng.sample(SMALL_TALK, rng.randint(3, 6) if not steps else rng.randint(1, 4))
        # Small talk before, between and after the storyline steps.
        slots = [[] for _ in range(len(steps) + 1)]
        for pair in chatter:
            rng.choice(slots).append(pair)
        for pair in slots[0]:
            self._smalltalk(session, *pair)
        for (index, step), after in zip(steps, slots[1:], strict=True):
            story = self.stories[index]
            self._step(session, day, index, story, step)
            if rng.random() < 0.5:
                self._topic_talk(session, story)
            for pair in after:
                self._smalltalk(session, *pair)
        a, b = rng.choice(CLOSINGS)
        self._smalltalk(session, a, b)

    def _smalltalk(self, session: Session, a: str, b: str) -> None:
        first, second = self.rng.sample(self.people, 2)
        self._say(session, first, a)
        self._say(session, second, b)

    def _topic_talk(self, session: Session, story: Storyline) -> None:
        others = [p for p in self.people if p not in (story.owner, story.reader)]
        speaker = self.rng.choice(others or [p for p in self.people if p != story.owner])
        self._say(session, speaker, self.rng.choice(TOPIC_TALK[story.kind]))

    def _step(self, session: Session, day: date, index: int, story: Storyline, step: int) -> None:
        rng = self.rng
        peer = rng.choice([p for p in self.people if p != story.owner])
        when = rng.choice(WHEN)[0]
        values = _values(story, peer, when)
        for role, template, tag in story.steps[step]:
            speaker = {"owner": story.owner, "peer": peer, "reader": story.reader or peer}[role]
            turn_id = self._say(session, speaker, _fill(template, values))
            if tag is not None:
                self.tagged[(index, tag)] = (turn_id, day)
                if "{when}" in template:
                    self.when_phrase[(index, tag)] = when

    def questions(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        rng = self.rng
        for index, story in enumerate(self.stories):
            values = _values(story, "")
            for q in story.questions:
                evidence = [self.tagged[(index, tag)][0] for tag in q.tags]
                month = month_year(self.tagged[(index, q.month_of)][1]) if q.month_of else ""
                phrasing = rng.choice(q.text.split("||"))
                text, answer = _fill(phrasing, {**values, "month": month}), _fill(q.answer, values)
                if q.when is not None:
                    turn_day = self.tagged[(index, q.when)][1]
                    answer = when_answer(self.when_phrase[(index, q.when)], turn_day)
                if q.month_of is not None:
                    day = self.tagged[(index, q.month_of)][1]
                    rivals = [
                        self.tagged[(index, other.month_of)][1]
                        for other in story.questions
                        if other.month_of not in (None, q.month_of)
                    ]
                    if any(month_year(r) == month_year(day) for r in rivals):
                        continue  # both events in one month: the month would not decide
                out.append(self._question(q.kind, text, answer, evidence))
            # Unanswerable: the same question about someone it did not happen to.
            strangers = [p for p in self.people if p != story.owner and p != story.reader]
            strangers = [
                p for p in strangers if not any(s.kind == story.kind and s.owner == p for s in self.stories)
            ]
            if strangers and story.swapped and rng.random() < 0.6:
                who = rng.choice(strangers)
                template = rng.choice(story.swapped)
                trap = [turn for (i, _), (turn, _) in self.tagged.items() if i == index]
                out.append(
                    self._question(
                        "unanswerable", _fill(template, {**values, "who": who}), "", [], trap=sorted(trap)
                    )
                )
        for template in rng.sample(ABSENT, 3):
            out.append(self._question("unanswerable", template.format(who=rng.choice(self.people)), "", []))
        return out

    def _question(
        self, kind: str, text: str, answer: str, evidence: list[str], trap: list[str] | None = None
    ) -> dict[str, Any]:
        return {
            "conversation": self.id,
            "kind": kind,
            "question": text,
            "answer": answer,
            "evidence": evidence,
            "trap": trap or [],
        }


def generate(seed: int = SEED, conversations: int = CONVERSATIONS) -> dict[str, Any]:
    """The whole set as one JSON-ready document."""
    rng = random.Random(seed)
    dialogs, questions = [], []
    for number in range(1, conversations + 1):
        people = rng.sample(PEOPLE, 3 if number % 3 == 0 else 2)
        builder = ConversationBuilder(rng, number, people)
        builder.plan(rng.randint(14, 18))
        start = date(2023, 1, 9) + timedelta(days=rng.randint(0, 540))
        sessions = builder.render(start)
        dialogs.append(
            {
                "id": builder.id,
                "participants": people,
                "sessions": [
                    {
                        "id": s.id,
                        "number": s.number,
                        "date": s.date,
                        "time": s.time,
                        "turns": [{"id": t.id, "speaker": t.speaker, "text": t.text} for t in s.turns],
                    }
                    for s in sessions
                ],
            }
        )
        questions.extend(builder.questions())
    for i, question in enumerate(questions):
        question["id"] = f"cq{i + 1:03d}"
    return {
        "description": "Lore's own conversational retrieval set; written by benchmarks/conversations.py.",
        "seed": seed,
        "conversations": dialogs,
        "questions": [{"id": q.pop("id"), **q} for q in questions],
    }


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def load(path: Path = DATA_FILE) -> dict[str, Any]:
    """The committed set, or a freshly generated one when the file is absent."""
    if path.exists():
        return json.loads(path.read_text())
    return generate()


def turn_time(session: dict[str, Any], index: int) -> datetime:
    """When a turn was said: the session's date and time, a minute per turn."""
    hour, minute = (int(x) for x in session["time"].split(":"))
    return datetime.fromisoformat(session["date"]).replace(hour=hour, minute=minute) + timedelta(
        minutes=index
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write or check the conversational retrieval set.")
    parser.add_argument("--out", type=Path, default=DATA_FILE)
    parser.add_argument("--check", action="store_true", help="fail if --out differs from a fresh generation")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    text = dumps(generate(args.seed))
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'DIFFERS from the generator'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    document = json.loads(text)
    turns = sum(len(s["turns"]) for c in document["conversations"] for s in c["sessions"])
    kinds: dict[str, int] = {}
    for q in document["questions"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    print(
        f"wrote {args.out}: {len(document['conversations'])} conversations, {turns} turns, "
        f"{len(document['questions'])} questions {kinds}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
