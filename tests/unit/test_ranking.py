"""The shared ranking helpers: the short cuts recall takes must not change its answer."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import embedding_text
from stores import Scope, open_local_store, open_postgres_store
from stores.engine import ranking
from stores.engine.lessons import LessonDraft, RecallQuery
from tests.support.stores import empty_postgres

WORDS = "kafka rebalance consumer timeout retry webhook signature stripe pool socket".split()


def exhaustive(candidates, terms, limit):
    """Every candidate scored, the way recall ranked before ``ranking.best`` (the legacy
    ranking: coverage, every term weighing the same)."""
    scored = [
        (round(ranking.relevance(sim, ranking.coverage(terms, text)) * factor, 6), lesson_id)
        for lesson_id, sim, factor, text in candidates
    ]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [(lesson_id, score) for score, lesson_id in scored[:limit]]


def test_best_gives_what_scoring_every_candidate_gives() -> None:
    rng = random.Random(7)
    for trial in range(300):
        terms = rng.sample(WORDS, rng.randint(0, 4))
        candidates = []
        for i in range(rng.randint(0, 60)):
            # Coarse values make exact ties (same score, ids decide) common.
            sim = None if rng.random() < 0.2 else rng.choice([0.1, 0.3, 0.5, 0.5, 0.7, 0.9, 1.2, -0.1])
            factor = rng.choice([0.25, 0.5, 0.75, 1.0, 1.2])
            text = " ".join(rng.sample(WORDS, rng.randint(0, 5)))
            candidates.append((f"id{rng.randint(0, 40):02d}-{i}", sim, factor, text))
        limit = rng.randint(1, 8)
        assert ranking.best(candidates, terms, limit, ranking.LEGACY) == exhaustive(
            candidates, terms, limit
        ), trial


def test_rare_terms_fill_the_budget_rarest_first() -> None:
    terms = ["common", "rare", "middling", "absent", "stopword"]
    postings = {"common": 5000.0, "rare": 3.0, "middling": 900.0, "absent": 0.0, "stopword": None}
    assert ranking.rare_terms(terms, postings, budget=1000) == ["rare", "middling"]
    assert ranking.rare_terms(terms, postings, budget=10_000) == ["rare", "middling", "common"]
    # The rarest term is searched even when it alone is over the budget (a moderately common
    # word still tells lessons apart); with ``rarest`` off, such a question searches no words.
    assert ranking.rare_terms(["common", "absent"], postings, budget=10) == ["common"]
    assert ranking.rare_terms(["middling", "common"], postings, budget=100) == ["middling"]
    assert ranking.rare_terms(["common", "absent"], postings, budget=10, rarest=False) == []
    off = replace(ranking.DEFAULT, postings_budget=10, rarest_over_budget=False)
    assert ranking.full_text_terms("common", ["common"], postings, off)[0] == []
    assert ranking.full_text_terms("common", ["common"], postings, replace(off, rarest_over_budget=True))[
        0
    ] == ["common"]
    assert ranking.rare_terms(["absent", "stopword"], postings) == []


def test_entities_that_fit_the_budget_come_before_rarer_words() -> None:
    terms = ["rotation", "chain_depth", "15", "leilani"]
    postings = {"rotation": 1600.0, "chain_depth": 1700.0, "15": 11000.0, "leilani": 3500.0}
    entities = ranking.query_entities(terms, {"leilani"}, ranking.DEFAULT)
    assert entities == {"chain_depth", "15", "leilani"}
    # The rarest word would fill the budget alone; the entity that fits is searched instead.
    assert ranking.rare_terms(terms, postings, 2000, entities) == ["chain_depth"]
    assert ranking.rare_terms(terms, postings, 2000) == ["rotation"]
    # An entity over the budget (a common number) waits its turn as words do.
    assert ranking.rare_terms(terms, postings, 10_000, entities) == ["chain_depth", "leilani", "rotation"]
    assert ranking.rare_terms(terms, postings, 20_000, entities) == [
        "chain_depth",
        "leilani",
        "15",
        "rotation",
    ]
    assert ranking.query_entities(terms, {"leilani"}, ranking.LEGACY) == set()


def test_candidates_are_ordered_by_the_chosen_terms_and_every_entity() -> None:
    terms = ["certificate", "rotation", "chain_depth", "15", "leilani"]
    ordering = ranking.candidate_terms(["rotation"], terms, {"leilani"}, ranking.DEFAULT)
    assert ordering == ["rotation", "chain_depth", "15", "leilani"]
    assert ranking.candidate_terms(["rotation"], terms, {"leilani"}, ranking.LEGACY) == ["rotation"]


# -- the ranking of issue 13: terms, rarity, entities, centring ----------------------------


def scores(candidates, query, params=ranking.DEFAULT, nearest=None):
    """(id, score) best first for ``query`` over ``candidates`` (id, similarity, text)."""
    rows = [(i, sim, 1.0, text) for i, sim, text in candidates]
    terms = ranking.lexical_terms(query, params=params)
    names = ranking.names(query, params)
    return ranking.best(rows, terms, len(rows), params, nearest, names)


def test_a_rare_distinguishing_word_outranks_words_every_candidate_shares() -> None:
    siblings = [(f"s{i}", 0.6, "kafka consumer rebalances in a loop, fixed by Mateus") for i in range(6)]
    target = ("t", 0.6, "kafka consumer rebalances, Sven fixed it")
    query = "kafka consumer rebalances loop that Sven fixed"
    assert scores([*siblings, target], query)[0][0] == "t"
    # Every word weighing the same (the ranking before), the siblings' extra word won.
    assert scores([*siblings, target], query, ranking.LEGACY)[0][0] != "t"


def test_an_entity_named_in_the_question_decides_between_near_identical_lessons() -> None:
    family = {
        "service": (
            "The Redis client of billing-api times out",
            "The Redis client of search-service times out",
        ),
        "version": ("librdkafka 6.28.8 rebalances in a loop", "librdkafka 6.28.5 rebalances in a loop"),
        "number": ("commit_interval_ms set to 3 in staging", "commit_interval_ms set to 30 in staging"),
        "path": ("settings in /etc/app/x.conf", "settings in /srv/app/x.conf"),
    }
    questions = {
        "service": "redis timeouts on billing-api",
        "version": "consumer keeps rebalancing after 6.28.8",
        "number": "where commit_interval_ms went to 3",
        "path": "the one configured through /etc/app/x.conf",
    }
    for axis, (right, wrong) in family.items():
        # The wrong sibling is even a little nearer by vector.
        ranked = scores([("right", 0.60, right), ("wrong", 0.62, wrong)], questions[axis])
        assert ranked[0][0] == "right", axis


def test_terms_keep_numbers_versions_identifiers_and_paths() -> None:
    terms = ranking.lexical_terms("After librdkafka 6.28.8 we set it to 3 for billing-api in /etc/x.conf")
    for term in ("librdkafka", "6.28.8", "3", "billing-api", "billing", "api", "/etc/x.conf", "conf"):
        assert term in terms, term
    # The ranking before kept none of them whole and dropped the single digit.
    legacy = ranking.lexical_terms("librdkafka 6.28.8 set to 3 for billing-api", params=ranking.LEGACY)
    assert "6.28.8" not in legacy and "3" not in legacy and "billing-api" not in legacy


def test_terms_are_safe_inside_fts5_quotes_and_a_tsquery() -> None:
    text = 'Weird "quoted" (x|y) & !z <-> a:b *c \\d 1.2.3-rc1 --flag /etc/a b_c ü-ß'
    for term in ranking.lexical_terms(text):
        assert all(ch.isalnum() or ch in "._/-" for ch in term), term
        assert term[0].isalnum() or term[0] == "/", term


def test_a_number_inside_a_version_or_path_is_not_that_number() -> None:
    ranked = scores(
        [("version", 0.5, "upgraded to 3.8.1 and set it to 30"), ("number", 0.5, "set it to 3")],
        "what did we set it to, 3?",
    )
    assert ranked[0][0] == "number"
    assert ranked[0][1] > ranked[1][1]


def test_long_questions_keep_their_late_terms() -> None:
    question = (
        "Why does the reverse proxy in front cut long lived websocket connections after sixty seconds "
        "on the canary cluster with ingress settings from the shared overrides, the one Zainab handled?"
    )
    assert len(ranking.lexical_terms(question, params=ranking.LEGACY)) == 16
    assert "zainab" not in ranking.lexical_terms(question, params=ranking.LEGACY)
    assert "zainab" in ranking.lexical_terms(question)


def test_word_forms_match_each_other() -> None:
    for query_word, lesson_word in [
        ("queries", "query"),
        ("making", "makes"),
        ("used", "use"),
        ("running", "runs"),
        ("fires", "fired"),
    ]:
        ranked = scores(
            [("has", 0.5, f"it {lesson_word} things"), ("lacks", 0.5, "nothing here")], query_word
        )
        assert ranked[0][0] == "has", (query_word, lesson_word)
        assert ranked[0][1] > ranked[1][1]


def test_words_about_lessons_are_not_terms() -> None:
    terms = ranking.lexical_terms("What was the root cause and the fix that resolved the Kafka lag?")
    assert terms == ["kafka", "lag"]


def test_names_are_capitalised_words_inside_a_sentence() -> None:
    found = ranking.names("Which team did Bruno join? Later Maya said QA. Sven agreed with Ines.")
    assert found == {"bruno", "maya", "qa", "ines"}  # "Which", "Later", "Sven" start sentences
    assert ranking.names("What wood did Bruno use?", ranking.LEGACY) == frozenset()


def test_scores_of_the_nearest_do_not_depend_on_other_candidates() -> None:
    """The backends find different full-text candidates (their indexes stem differently);
    the nearest vectors' scores must not change with them, or the backends would disagree."""
    rng = random.Random(3)
    words = [*WORDS, "billing-api", "6.28.8", "42", "/etc/a.conf", "Sven"]
    for trial in range(200):
        query = " ".join(rng.sample(words, rng.randint(1, 5)))
        near = [(f"n{i}", rng.random(), " ".join(rng.sample(words, rng.randint(0, 6)))) for i in range(8)]
        extra = [(f"x{i}", rng.random(), " ".join(rng.sample(words, rng.randint(0, 6)))) for i in range(5)]
        ids = {i for i, _, _ in near}
        alone = dict(scores(near, query, nearest=ids))
        together = dict(scores([*near, *extra], query, nearest=ids))
        assert {i: together[i] for i in ids} == alone, trial


def test_the_order_of_candidates_changes_no_score() -> None:
    rng = random.Random(5)
    for trial in range(100):
        query = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
        cands = [(f"c{i}", rng.random(), " ".join(rng.sample(WORDS, rng.randint(0, 5)))) for i in range(12)]
        shuffled = cands[:]
        rng.shuffle(shuffled)
        assert scores(cands, query) == scores(shuffled, query), trial


def test_centred_similarity_discounts_what_every_lesson_of_the_scope_shares() -> None:
    """A dialog's turns all carry the speakers' names; "Bruno: Later!" is mostly that shared
    direction, so from the origin it looks like any question about Bruno."""
    rng = np.random.default_rng(11)
    dim = 64
    shared = rng.normal(size=dim)
    topics = rng.normal(size=(20, dim))

    def unit(v: np.ndarray) -> np.ndarray:
        return (v / np.linalg.norm(v)).astype(np.float32)

    scope = np.stack([unit(3 * shared + t) for t in topics])
    question = unit(3 * shared + topics[0] + 0.5 * rng.normal(size=dim))
    answer = unit(shared + topics[0])  # says what was asked, with less of the shared part
    small_talk = unit(3 * shared + 0.3 * rng.normal(size=dim))
    lessons = np.stack([answer, small_talk])
    plain = lessons @ question
    assert plain[1] > plain[0]
    centred = ranking.centred_similarities(question, lessons, ranking.anchor(scope))
    assert centred[0] > centred[1]


def test_a_scope_of_one_lesson_is_not_centred_onto_that_lesson() -> None:
    v = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    origin = ranking.anchor(v[None, :])
    assert np.allclose(origin, v / 2)
    assert ranking.centred_similarities(v, v[None, :], origin)[0] == pytest.approx(1.0)
    # A query at the anchor itself has no direction: no similarity rather than NaN.
    assert ranking.centred_similarities(origin, v[None, :], origin) == [None]
    assert ranking.relevance(None, 0.5) == ranking.relevance(float("nan"), 0.5) == 0.25 * 0.5


def test_an_empty_sample_anchors_at_the_origin() -> None:
    assert np.array_equal(ranking.anchor(np.zeros((0, 4), dtype=np.float32)), np.zeros(4, dtype=np.float32))


# -- both backends, the real model ----------------------------------------------------------

FAMILY = [
    (
        f"The Redis client of {service} times out during failover in {env}",
        f"{person} set socket_timeout to {number} in /etc/{service}/redis.yaml after redis-py {version}.",
    )
    for service, env, person, number, version in [
        ("billing-api", "staging", "Sven", 3, "4.5.1"),
        ("search-service", "staging", "Sven", 3, "4.5.1"),
        ("billing-api", "production", "Sven", 3, "4.5.1"),
        ("billing-api", "staging", "Amara", 3, "4.5.1"),
        ("billing-api", "staging", "Sven", 30, "4.5.1"),
        ("billing-api", "staging", "Sven", 3, "4.6.0"),
        ("ledger-worker", "canary", "Ines", 12, "5.0.2"),
        ("geo-locator", "QA", "Mateus", 8, "3.9.9"),
    ]
]
FAMILY_QUESTIONS = {
    "redis timeouts when the primary switches over on search-service": 1,
    "which Redis failover hang was in production?": 2,
    "the redis failover problem Amara sorted out": 3,
    "redis failover where socket_timeout ended up at 30": 4,
    "redis connection hangs on failover with redis-py 4.6.0": 5,
    "what did Mateus change for the Redis client?": 7,
}


def test_both_backends_rank_a_near_duplicate_family_the_same_and_by_its_entities(
    tmp_path: Path, postgres_url: str, embedder: Embedder
) -> None:
    empty_postgres(postgres_url)
    scope = Scope("local", "families")
    stores = {"local": open_local_store(tmp_path / "lore.db"), "postgres": open_postgres_store(postgres_url)}
    try:
        vectors = embedder.encode_documents([embedding_text(p, r) for p, r in FAMILY])
        items = [(LessonDraft(p, r, tags=("redis",)), v) for (p, r), v in zip(FAMILY, vectors, strict=True)]
        for store in stores.values():
            assert not any(r.merged for r in store.save_many(scope, items))
        for question, target in FAMILY_QUESTIONS.items():
            q = RecallQuery(text=question, vector=embedder.encode_query(question), limit=4)
            ranked = {
                name: [
                    (h.lesson.problem + h.lesson.resolution, round(h.score, 4))
                    for h in store.recall(scope, q)
                ]
                for name, store in stores.items()
            }
            assert ranked["local"] == ranked["postgres"], question
            assert ranked["local"][0][0] == "".join(FAMILY[target]), question
    finally:
        for store in stores.values():
            store.close()


def test_a_short_stem_does_not_match_a_stopword() -> None:
    """ "Ines" stripped to a two-letter stem would be "in", which every lesson says."""
    ranked = scores(
        [("other", 0.5, "set it in the config"), ("ines", 0.5, "Ines set it")], "what did Ines set?"
    )
    assert ranked[0][0] == "ines"
    assert dict(ranked)["other"] < dict(ranked)["ines"]


# -- what issue 13's second round added: open totals, redundancy, entity weight ---------------

ENVS = ["production", "staging", "QA", "canary", "sandbox", "development"]
SIBLING = "pricing-engine on {env}: TLS certificate renewal serves the old certificate, see /srv/runtime/issuer.yaml"
ASKED = "report-builder on production: TLS certificate renewal fails silently before expiry, see /srv/runtime/issuer.yaml"
RENEWAL_QUESTION = (
    "TLS certificate renewal that lapses unnoticed with the setting in /srv/runtime/issuer.yaml"
)


def renewal_candidates() -> list[tuple[str, float, str]]:
    """Six siblings that differ only by an environment the question does not name, all a
    little nearer by vector than the lesson the question is about."""
    siblings = [(f"s{i}", 0.72 - 0.01 * i, SIBLING.format(env=env)) for i, env in enumerate(ENVS)]
    return [*siblings, ("asked", 0.6, ASKED)]


def test_siblings_that_differ_only_in_what_the_question_does_not_ask_do_not_fill_the_list() -> None:
    cands = renewal_candidates()
    ids = {i for i, _, _ in cands}
    top5 = [i for i, _ in scores(cands, RENEWAL_QUESTION, nearest=ids)[:5]]
    assert "asked" in top5
    assert top5[0] == "s0"  # the best sibling itself keeps its place
    without = ranking.RankingParams(redundancy_penalty=1.0)
    assert "asked" not in [i for i, _ in scores(cands, RENEWAL_QUESTION, without, nearest=ids)[:5]]


def test_the_best_sibling_keeps_its_score_and_the_others_lose_a_fixed_share() -> None:
    cands = renewal_candidates()
    ids = {i for i, _, _ in cands}
    demoted = dict(scores(cands, RENEWAL_QUESTION, nearest=ids))
    plain = dict(scores(cands, RENEWAL_QUESTION, ranking.RankingParams(redundancy_penalty=1.0), nearest=ids))
    assert demoted["s0"] == plain["s0"]
    assert demoted["asked"] == plain["asked"]
    for i in range(1, len(ENVS)):
        assert demoted[f"s{i}"] == pytest.approx(plain[f"s{i}"] * 0.8, abs=2e-6)


def test_a_sibling_that_has_a_word_the_question_asks_for_is_not_demoted() -> None:
    cands = renewal_candidates()
    ids = {i for i, _, _ in cands}
    question = RENEWAL_QUESTION + " in sandbox"
    demoted = dict(scores(cands, question, nearest=ids))
    plain = dict(scores(cands, question, ranking.RankingParams(redundancy_penalty=1.0), nearest=ids))
    sandbox = f"s{ENVS.index('sandbox')}"
    assert demoted[sandbox] == plain[sandbox]
    assert max(demoted, key=demoted.__getitem__) == sandbox


def test_a_full_text_only_candidate_never_demotes_a_nearest_one() -> None:
    """Full-text candidates differ between backends; if one could demote a nearest lesson,
    the two backends would give that lesson different scores."""
    cands = renewal_candidates()
    near = {i for i, _, _ in cands}
    twin = ("twin", 0.9, SIBLING.format(env="eu-west"))  # a better sibling, found by words only
    alone = dict(scores(cands, RENEWAL_QUESTION, nearest=near))
    together = dict(scores([*cands, twin], RENEWAL_QUESTION, nearest=near))
    assert {i: together[i] for i in near} == alone
    assert max(together, key=together.__getitem__) == "twin"


def test_demoting_stops_at_the_limit_without_changing_what_is_returned() -> None:
    rng = random.Random(17)
    for trial in range(100):
        cands = renewal_candidates()
        rng.shuffle(cands)
        ids = {i for i, _, _ in cands if rng.random() < 0.7}
        rows = [(i, sim, 1.0, text) for i, sim, text in cands]
        terms = ranking.lexical_terms(RENEWAL_QUESTION)
        full = ranking.best(rows, terms, len(rows), ranking.DEFAULT, ids)
        limit = rng.randint(1, len(rows))
        assert ranking.best(rows, terms, limit, ranking.DEFAULT, ids) == full[:limit], trial


def test_a_lesson_with_the_asked_for_word_outranks_one_without_when_both_have_rare_words() -> None:
    """Both full-text candidates have words no nearest lesson has (the asked-for path);
    before, both lexical scores were capped at 1 and the nearer vector won although it
    lacks the environment the question names."""
    near = [
        (f"n{i}", 0.7, f"GraphQL gateway query depth in staging, see /srv/app{i}/gateway.config.js")
        for i in range(6)
    ]
    near.append(("n6", 0.7, "GraphQL gateway query depth in development, see /srv/app6/gateway.config.js"))
    right = ("right", 0.46, "GraphQL gateway N+1 query in development, see /etc/overrides/gateway.config.js")
    wrong = ("wrong", 0.48, "GraphQL gateway query depth in sandbox, see /etc/overrides/gateway.config.js")
    question = "GraphQL gateway firing a query per row with /etc/overrides/gateway.config.js in development"
    ids = {i for i, _, _ in near}
    ranked = dict(scores([*near, right, wrong], question, nearest=ids))
    assert ranked["right"] > ranked["wrong"]
    capped = dict(
        scores([*near, right, wrong], question, ranking.RankingParams(open_total=False), nearest=ids)
    )
    assert capped["right"] < capped["wrong"]


def test_a_version_outweighs_two_ordinary_words_that_are_as_rare() -> None:
    """A question naming a version and two plain words: the lesson with the version is
    the one asked about (at double weight the two tied)."""
    pool = [(f"p{i}", 0.5, "consumer lag alert") for i in range(8)]
    entity = ("entity", 0.5, "consumer lag alert with librdkafka 6.28.8")
    words = ("words", 0.5, "consumer lag alert in the nightly backfill")
    cands = [*pool, entity, words]
    ids = {i for i, _, _ in cands}
    ranked = dict(scores(cands, "consumer lag with 6.28.8 in the nightly backfill", nearest=ids))
    assert ranked["entity"] > ranked["words"]


@pytest.mark.parametrize("params", [ranking.DEFAULT, ranking.LEGACY], ids=["default", "legacy"])
def test_prepared_texts_are_matched_from_the_cache_with_the_same_terms(params: ranking.RankingParams) -> None:
    """Recall prepares its word matches' texts while the query embeds; matching them after must
    read those words from the cache (no miss) and find what an unprepared match finds."""
    from stores.engine.terms import Matcher, prepare, vocabulary

    texts = [
        f"{a} {b} on {c}-api v2.{i}"
        for i, (a, b, c) in enumerate(zip(WORDS, WORDS[3:], WORDS[5:], strict=False))
    ]
    terms = ranking.lexical_terms("kafka consumer retry on stripe-api v2.3", params=params)
    vocabulary.cache_clear()
    want = [Matcher(terms, params).found(t) for t in texts]
    vocabulary.cache_clear()
    prepare(texts, params)
    misses = vocabulary.cache_info().misses
    assert [Matcher(terms, params).found(t) for t in texts] == want
    assert vocabulary.cache_info().misses == misses
    assert any(want)
