"""Stage 3 end to end on text: candidates, verification, clustering, flags."""

import random
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from newsdedup.report import RunReport
from newsdedup import cascade, job
from newsdedup.config import load_config

from conftest import make_df

T0 = datetime(2024, 3, 1, 8, 0)
VOCAB = ("minister announced plan river flood police court budget market school hospital election team "
         "coach match rail bridge port export price fuel rice farmer garment worker union council mayor "
         "village district storm cyclone shelter relief road traffic bus train ferry launch water power "
         "grid factory owner wage protest strike talks agreement deal loan bank reserve inflation").split()


def words(seed, n=300):
    rng = random.Random(seed)
    return [rng.choice(VOCAB) for _ in range(n)]


def edit(toks, positions, seed):
    rng = random.Random(seed)
    out = list(toks)
    for p in positions:
        out[p] = rng.choice(VOCAB) + "x"      # a word no original text contains
    return out


def run(spark, conf, rows):
    df = make_df(spark, [(i, f"https://s{i}.example/a/{i}", title, " ".join(body), T0 + timedelta(minutes=i),
                          f"s{i}", lang) for i, title, body, lang in rows])
    report = RunReport(run_id="t")
    return cascade.run_cascade(spark, df, conf, report), report


def simhash_links(result):
    return {(r.duplicate_id, r.canonical_id): r for r in result.links.where("stage = 'simhash'").collect()}


@pytest.mark.parametrize("settings", [{}, {"local_component_max": 2}, {"verify_broadcast_max": 0}])
def test_chain_joins_the_earliest_with_score_to_canonical_and_via(spark, conf, settings):
    # local_component_max 2: the three-document component is verified and clustered by joins and
    # rounds (SimhashStage._by_joins), not in one task. verify_broadcast_max 0: the candidate
    # documents' components are joined to their pairs and features instead of held by every worker
    # (verify.held_components). The links are the same.
    conf = replace(conf, simhash=replace(conf.simhash, **settings))
    a = words(1)
    b = edit(a, range(5, 150, 10), 2)          # 15 words changed in the first half
    c = edit(b, range(155, 300, 10), 3)        # 15 more in the second half: far from a, close to b
    far = words(9)
    result, report = run(spark, conf, [(1, "Flood", a, "en"), (2, "Flood", b, "en"), (3, "Flood", c, "en"),
                                       (4, "Other", far, "en")])
    links = simhash_links(result)
    assert set(links) == {(2, 1), (3, 1)}
    assert links[(2, 1)].via_id == 1 and links[(3, 1)].via_id == 2
    # The score is c's Jaccard with the canonical a, below the pair threshold it joined by.
    assert links[(3, 1)].score < conf.simhash.language("en").jaccard < links[(2, 1)].score
    assert report.counts["simhash.clusters.size_3_5"] == 1
    assert report.counts["simhash.candidates.tables"] + report.counts["simhash.candidates.minhash"] >= 2


def test_the_report_names_the_largest_candidate_component(spark, conf):
    a, b = words(1), words(2)
    a2 = edit(a, range(5, 150, 10), 2)
    result, report = run(spark, conf, [(1, "Flood", a, "en"), (2, "Flood", a2, "en"),
                                       (3, "Flood", edit(a2, range(155, 300, 10), 3), "en"),
                                       (5, "Port", b, "en"), (6, "Port", edit(b, [7], 4), "en"), (7, "x", words(9), "en")])
    assert report.counts["simhash.candidate_documents"] == 5          # 7 is no one's candidate
    assert report.counts["simhash.candidate_component_max"] == 3      # {1, 2, 3} and {5, 6}


def test_thresholds_are_per_language_and_languages_never_meet(spark):
    strict = load_config(overrides={"spark": {"shuffle_partitions": 2},
                                    "simhash": {"languages": {"en": {"jaccard": 0.95, "containment": 0.99}}}})
    a = words(4)
    b = edit(a, range(3, 300, 25), 5)          # 12 edits: Jaccard ~0.8
    result, _ = run(spark, strict, [(1, "T", a, "en"), (2, "T", b, "en"), (3, "V", a, "bn"), (4, "V", b, "bn"),
                                    (5, "U", edit(a, [7], 6), "en")])
    # en needs 0.95 now; bn keeps the default; 5 (one edit) is close to 1 but never to 3 (other language).
    assert set(simhash_links(result)) == {(4, 3), (5, 1)}


def test_templated_reports_with_other_teams_and_scores_stay_apart(spark, conf):
    template = ("{home} beat {away} {hs}-{as_} at the {ground} on Saturday to move level on points with the "
                "leaders. {scorer} opened the scoring after {m1} minutes with a low shot from the edge of the "
                "area, and {home} doubled the lead when {scorer2} headed in a corner just before the break. "
                "{away} pulled one back through {visitor} in the {m2}th minute but could not find an equaliser "
                "despite sustained pressure in the closing stages. The manager said afterwards that the team "
                "had shown great character and that the supporters had played their part in a fine atmosphere. "
                "The next match is away from home on Wednesday evening, when the squad hopes to have several "
                "injured players back in training and available for selection once again this week.")
    g1 = dict(home="Arsenal", away="Everton", hs=2, as_=1, ground="Emirates", scorer="Saka", m1=12,
              scorer2="Gabriel", visitor="Calvert-Lewin", m2=67)
    g2 = dict(home="Leeds", away="Burnley", hs=3, as_=2, ground="Elland Road", scorer="Bamford", m1=31,
              scorer2="Ayling", visitor="Barnes", m2=54)
    r1, r2 = template.format(**g1), template.format(**g2)
    r1_typo = r1.replace("sustained", "sustianed")
    rows = [(1, "Match report", r1.split(" "), "en"), (2, "Match report", r2.split(" "), "en"),
            (3, "Match report", r1_typo.split(" "), "en")]
    result, _ = run(spark, conf, rows)
    assert set(simhash_links(result)) == {(3, 1)}


def test_oversize_buckets_are_split_counted_and_flagged(spark):
    small = load_config(overrides={"spark": {"shuffle_partitions": 2}, "simhash": {"max_band_bucket": 2}})
    a = words(7)
    rows = [(i, "Same", edit(a, [i * 7], i), "en") for i in range(1, 6)]   # five near copies
    result, report = run(spark, small, rows)
    assert report.counts["simhash.split_documents"] >= 3
    assert any("max_band_bucket" in n for n in report.notes)
    flagged = {r.id for r in result.documents.collect() if any(f.startswith("simhash_bucket_split:")
                                                               for f in (r.flags or []))}
    assert len(flagged) == report.counts["simhash.split_documents"]
    # Chunks of consecutive fingerprints still join the copies (through shared other buckets).
    assert {d for d, _ in simhash_links(result)} == {2, 3, 4, 5}
