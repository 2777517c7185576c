"""The facts ``team_chat`` plants in a conversation, one template per kind of fact, and how each is asked.

Each template says which slots it fills (``pools``: a word list, or ``@name`` for a value the
generator works out from the conversation: ``@person`` a fresh third party, ``@month`` a month
after the turn, ``@week``/``@date`` a later Monday/day), which slots are its ``key`` (at most one
turn per conversation holds a key, or one chain of turns for an update, so the key alone decides
the right turn), the turn's wordings and the question's. A question says ``{x_q}`` for a slot
whose value is a pair: the other words seven times in ten, the same words otherwise.
"""

from __future__ import annotations

from typing import Any

from benchmarks.sets import team_chat_vocab as v

Template = dict[str, Any]

FACTS: tuple[Template, ...] = (
    {
        "tid": "contract",
        "pools": {"vendor": v.VENDORS, "service": v.SERVICES, "months": v.MONTHS_TERM},
        "key": ("vendor",),
        "turns": (
            "We signed with {vendor} for {service}, it's a {months}-month term.",
            "{vendor} paperwork is done: {months} months of {service}, copy is in the shared drive.",
        ),
        "questions": (
            "How long is our agreement with {vendor}?",
            "For how many months did we commit to {vendor}?",
        ),
        "answer": "{months} months",
    },
    {
        "tid": "offer",
        "pools": {"person": "@person", "role": v.ROLES},
        "key": ("role",),
        "turns": (
            "{person} said yes to the {role} offer this morning!",
            "Offer for the {role} opening went out and {person} accepted it an hour ago.",
        ),
        "questions": ("Who accepted the {role_q} job?", "Which candidate took the {role_q} position?"),
        "answer": "{person}",
    },
    {
        "tid": "request",
        "pools": {"customer": v.CUSTOMERS, "feature": v.FEATURES, "month": v.MONTH_NAMES},
        "key": ("customer",),
        "turns": (
            "{customer} want {feature} before they renew in {month}.",
            "Spoke to {customer}: no renewal in {month} unless we have {feature}.",
        ),
        "questions": (
            "What is {customer} asking for ahead of their renewal?",
            "Which feature does {customer} need before signing again?",
        ),
        "answer": "{feature}",
    },
    {
        "tid": "talk",
        "pools": {"conf": v.CONFERENCES, "city": v.CITIES},
        "key": ("conf",),
        "turns": (
            "My talk at {conf} got accepted, so I'm off to {city} for it.",
            "Booked my hotel in {city} for {conf}, the talk is on the second day.",
        ),
        "questions": (
            "In which city is {conf} held, where {me} is speaking?",
            "Where does {me} present at {conf}?",
        ),
        "answer": "{city}",
    },
    {
        "tid": "budget",
        "pools": {"item": v.BUDGET_ITEMS, "amount": ("€3,000", "€4,500", "€6,000", "€8,000", "€12,000")},
        "key": ("item",),
        "turns": (
            "Finance approved {amount} for {item}, we can go ahead.",
            "Good news, we got {amount} for {item} this quarter.",
        ),
        "questions": ("How much money was approved for {item_q}?", "What is the budget for {item_q}?"),
        "answer": "{amount}",
    },
    {
        "tid": "tool",
        "pools": {"purpose": v.TOOL_PURPOSES, "tool": v.TOOLS, "reason": v.TOOL_REASONS},
        "key": ("purpose",),
        "turns": (
            "Decided: {tool} for {purpose}, {reason}.",
            "We're going with {tool} for {purpose} since {reason}.",
        ),
        "questions": ("Which tool did we pick for {purpose_q}?", "What are we using for {purpose_q} now?"),
        "answer": "{tool}",
    },
    {
        "tid": "weekend",
        "pools": {"activity": v.ACTIVITIES, "place": v.PLACES},
        "key": ("me", "activity"),
        "turns": (
            "Spent the whole weekend {activity} in {place}, my legs are gone.",
            "I was {activity} in {place} on Saturday, the weather held up.",
        ),
        "questions": ("Where did {me} {activity_1}?", "Which place did {me} {activity_1} in?"),
        "answer": "{place}",
    },
    {
        "tid": "ticket",
        "pools": {"customer": v.CUSTOMERS, "issue": v.ISSUES, "ticket": "@ticket"},
        "key": ("customer", "issue"),
        "turns": (
            "Opened {ticket} for the {issue} at {customer}.",
            "{customer} {issue} is tracked as {ticket}, assigned it to myself.",
        ),
        "questions": (
            "What's the ticket number for {customer} {issue_q}?",
            "Which ticket covers {issue_q} at {customer}?",
        ),
        "answer": "{ticket}",
    },
)

# Two turns: the question names what turn ``a`` says about a person, the answer is in turn ``b``,
# which names the person but not what ``a`` says.
TWO_TURN: tuple[Template, ...] = (
    {
        "tid": "outage-trip",
        "pools": {"person": "@person", "system": v.SYSTEMS, "city": v.CITIES, "purpose": v.TRIP_PURPOSES},
        "key": ("system",),
        "turns_a": (
            "{person} fixed the {system} outage last night, stayed on until it was stable.",
            "Huge thanks to {person} for sorting out the {system} outage.",
        ),
        "turns_b": (
            "{person} is in {city} all next week for {purpose}.",
            "{person} flies to {city} on Monday, {purpose}.",
        ),
        "questions": (
            "Which city is the colleague who handled the {system_q} outage travelling to?",
            "Where did the person that fixed the {system_q} go next?",
        ),
        "answer": "{city}",
    },
    {
        "tid": "champion-leaves",
        "pools": {"person": "@person", "customer": v.CUSTOMERS, "employer": v.OTHER_EMPLOYERS},
        "key": ("customer",),
        "turns_a": (
            "{customer} renewed, and honestly it was all {person} pushing it on their side.",
            "{person} got the {customer} renewal through their board.",
        ),
        "turns_b": (
            "{person} just told me they're leaving for {employer} next month.",
            "Heard {person} took a job at {employer}.",
        ),
        "questions": (
            "Which company is our champion at {customer} moving to?",
            "Where is the person who got {customer} to renew going to work?",
        ),
        "answer": "{employer}",
    },
    {
        "tid": "hire-project",
        "pools": {"person": "@person", "team": v.TEAMS, "project": v.FIRST_PROJECTS},
        "key": ("team",),
        "turns_a": (
            "{person} signed, joining the {team} team next month.",
            "New starter on {team}: {person}, first day soon.",
        ),
        "turns_b": (
            "First thing for {person} will be {project}.",
            "I'd like {person} to start with {project}.",
        ),
        "questions": (
            "What will the new {team_q} hire work on first?",
            "What is the first task of our newest {team_q} person?",
        ),
        "answer": "{project}",
    },
    {
        "tid": "organiser-venue",
        "pools": {"person": "@person", "event": v.EVENTS, "venue": v.VENUES},
        "key": ("event",),
        "turns_a": (
            "{person} volunteered to organise the {event}.",
            "The {event} is in {person}'s hands this year.",
        ),
        "turns_b": ("{person} booked {venue}, deposit is paid.", "{person} went with {venue} in the end."),
        "questions": (
            "Which venue did the {event_q} organiser book?",
            "Where will the {event_q} be, per whoever arranges it?",
        ),
        "answer": "{venue}",
    },
)

# When: ``rel`` is a phrase relative to the turn's date (``past`` or ``future`` ones).
WHEN: tuple[Template, ...] = (
    {
        "tid": "shipped",
        "rel": "past",
        "pools": {"customer": v.CUSTOMERS, "feature": v.FEATURES},
        "key": ("customer",),
        "turns": (
            "We shipped {feature} to {customer} {rel}.",
            "{customer} got {feature} {rel}, no complaints so far.",
        ),
        "questions": (
            "When did {customer} receive {feature}?",
            "On what date was {feature} delivered to {customer}?",
        ),
    },
    {
        "tid": "renewal-call",
        "rel": "future",
        "pools": {"vendor": v.VENDORS},
        "key": ("vendor",),
        "turns": (
            "The {vendor} renewal call is {rel}.",
            "{vendor} renewal call: {rel}, I will send the invite.",
        ),
        "questions": (
            "On what date do we talk to {vendor} about renewing?",
            "When is the renewal meeting with {vendor}?",
        ),
    },
    {
        "tid": "interview",
        "rel": "past",
        "pools": {"person": "@person", "role": v.ROLES},
        "key": ("person",),
        "turns": (
            "{person} came in for the {role} interview {rel}.",
            "Interviewed {person} for {role} {rel}, solid answers.",
        ),
        "questions": ("What day was {person} interviewed?", "When did {person} have the interview with us?"),
    },
    {
        "tid": "lease",
        "rel": "future",
        "pools": {"city": v.CITIES},
        "key": ("city",),
        "turns": ("We sign the lease for the {city} office {rel}.", "{city} office: lease signing is {rel}."),
        "questions": (
            "What day is the {city} office lease being signed?",
            "When do we put pen to paper on the {city} premises?",
        ),
    },
)

# Inference: the answer follows from what the speaker says, in other words.
INFERENCE: tuple[Template, ...] = (
    {
        "tid": "leave",
        "pools": {"month": "@month", "ordinal": v.ORDINALS},
        "key": ("me", "month"),
        "turns": (
            "Heads up, I'm on leave the {ordinal} week of {month}.",
            "I booked the {ordinal} week of {month} off.",
        ),
        "questions": (
            "Could {me} take a customer call on {month} {day}?",
            "Is {me} around on {day} {month}?",
        ),
    },
    {
        "tid": "diet",
        "pools": {"diet": v.DIETS},
        "key": ("me",),
        "turns": (
            "Any restaurant is fine for me, but {diet}.",
            "Just so you know for the team lunch: {diet}.",
        ),
        "questions": ("{diet_1}",),
        "answer": "{diet_2}",
    },
    {
        "tid": "language",
        "pools": {"lang": v.LANGUAGES},
        "key": ("lang",),
        "turns": (
            "I grew up in {lang_1}, so {lang} was what we spoke at home.",
            "Fun fact, I'm from {lang_1}, {lang} is my first language.",
        ),
        "questions": ("Who in this chat could read the contract {lang_2}?",),
        "answer": "{me}",
    },
    {
        "tid": "remote",
        "pools": {"far": v.FAR_CITIES, "month": "@month"},
        "key": ("me", "month"),
        "turns": (
            "I'll be working from {far} for the whole of {month}.",
            "All of {month} I'm in {far}, laptop comes with me.",
        ),
        "questions": ("Would a 9am London standup suit {me} in {month}?",),
        "answer": "No: {me} works from {far} that month, hours apart from London.",
    },
    {
        "tid": "skill",
        "pools": {
            "skill": v.SKILLS,
            "years": ("three", "four", "five", "six", "eight"),
            "employer": v.OTHER_EMPLOYERS,
        },
        "key": ("skill",),
        "turns": ("Before this job I spent {years} years writing {skill} at {employer}.",),
        "questions": ("Who here has the background to review the {skill_q} code?",),
        "answer": "{me}",
    },
)

# Update: the first turn sets ``value``, each later one changes it; the latest turn is the answer.
UPDATE: tuple[Template, ...] = (
    {
        "tid": "offsite",
        "pools": {"value": v.CITIES},
        "key": (),
        "first": ("The offsite will be in {value}, I've asked for quotes.",),
        "change": (
            "Offsite update: we're doing {value} instead, the first venue fell through.",
            "Moved the offsite to {value}, flights are cheaper.",
        ),
        "questions": (
            "Where is the team retreat happening?",
            "Which city did we land on for the company getaway?",
        ),
    },
    {
        "tid": "standup",
        "pools": {"value": v.STANDUP_TIMES},
        "key": (),
        "first": ("From next week standup is at {value}.",),
        "change": ("Standup moves to {value}, too many clashes at the old time.",),
        "questions": (
            "What time is the daily sync these days?",
            "When do we meet for the morning check-in now?",
        ),
    },
    {
        "tid": "oncall",
        "pools": {"value": "@participant", "week": "@week"},
        "key": ("week",),
        "speaker_is_value": True,
        "first": ("I'm on call the week of {week}.",),
        "change": ("Swapped with {previous}, I've got the pager the week of {week}.",),
        "questions": (
            "Who is carrying the pager the week of {week}?",
            "Which of us has on-call duty starting {week}?",
        ),
    },
    {
        "tid": "move",
        "pools": {"value": "@date"},
        "key": (),
        "first": ("Movers are booked for {value}.",),
        "change": ("The move slipped to {value}, the landlord needs more time.",),
        "questions": ("When are we moving into the new office?",),
    },
    {
        "tid": "launch",
        "pools": {"project": v.PROJECTS, "value": "@date"},
        "key": ("project",),
        "first": ("{project} goes live on {value}.",),
        "change": ("{project} launch pushed to {value}.", "New date for {project}: {value}."),
        "questions": ("What's the go-live date for {project_q}?",),
    },
    {
        "tid": "payroll",
        "pools": {"value": v.VENDORS},
        "key": (),
        "first": ("We're leaning towards {value} for payroll.",),
        "change": ("Final answer on payroll: {value}.",),
        "questions": ("Which provider runs our salaries in the end?",),
    },
    {
        "tid": "quote",
        "pools": {"customer": v.CUSTOMERS, "value": v.PRICES},
        "key": ("customer",),
        "first": ("We quoted {customer} {value} a seat.",),
        "change": ("{customer} pushed back, new quote is {value} a seat.",),
        "questions": ("What per-user price are we offering {customer} now?",),
    },
)
