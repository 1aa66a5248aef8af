"""A slice's closure expands by the stored components: one pass over the stored keys, the rest by label.

Two stored groups are reached by the slice only through one member each (the same URL as an older
newcomer, which takes that member's URL group over):

- c, x, y: x has c's text (a stage-2 duplicate), y an edit of it (stage 3). Once c is a stage-1
  duplicate of the newcomer, x is the first of its text and y links to x. Only c is reached by a
  key; x and y come in through c's component (give every document its own component and the
  stored links x -> c and y -> c stay active while one run over everything has y -> x).
- c2, x2, z: x2 has c2's text but another language, z an edit of x2 in x2's language. In the stored
  run x2 is a stage-2 duplicate and z meets nobody of its language; once c2 is taken over, x2 is
  the first of its text and z links to it. x2's stage-3 pairs are not in its component (its text is
  its canonical's, its language is not), so it is unsettled and takes a second pass, which finds z
  (count every member settled and z stays out).
"""

from __future__ import annotations

import numpy as np
import pytest

from newsdedup import job
from newsdedup.clustering import component_labels
from newsdedup.incremental import Components
from newsdedup.io import store

from test_incremental_scope import DAY1, DAY2, edited, keyset, row, slice_files, text


def _row(i, url, title, body, when, lang="en"):
    return dict(row(i, url, title, body, when), lang=lang)


STORED = [
    _row(100, "https://a.example/c", "Story c", text(100), DAY2),
    _row(101, "https://b.example/x", "Story c", text(100), DAY2),
    _row(102, "https://b.example/y", "Story c", edited(text(100)), DAY2),
    _row(110, "https://a.example/c2", "Story c2", text(110), DAY2, "en"),
    _row(111, "https://b.example/x2", "Story c2", text(110), DAY2, "bn"),
    _row(112, "https://b.example/z", "Story c2", edited(text(110)), DAY2, "bn"),
    _row(120, "https://b.example/lone", "Alone", text(120), DAY2),
]
NEW = [
    _row(200, "https://a.example/c", "Another story", text(200), DAY1),    # takes c's URL group over
    _row(210, "https://a.example/c2", "Another story", text(210), DAY1),   # takes c2's
]


def test_component_labels_name_each_component_by_its_smallest_id():
    ids = np.array([9, 3, 7, 5, 1], np.int64)
    labels = component_labels(ids, np.array([9, 7]), np.array([3, 9]))
    assert labels.tolist() == [3, 3, 3, 5, 1]
    assert component_labels(ids, np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == ids.tolist()


def test_expanding_brings_whole_components_and_names_what_needs_a_pass():
    import pyarrow as pa

    comps = Components.of(pa.table({"id": pa.array([1, 2, 3, 4, 5], pa.int64()),
                                    "component": pa.array([1, 1, 3, 3, 5], pa.int64()),
                                    "settled": pa.array([True, True, True, False, True])}))
    members, to_pass = comps.expand(np.array([2, 3, 99], np.int64))
    assert members.tolist() == [1, 2, 3, 4, 99]      # 99 has no component: it stands for itself
    assert to_pass.tolist() == [4, 99]                # the unsettled member, and the unknown id
    assert comps.covers(np.array([1, 5])) and not comps.covers(np.array([1, 6]))


@pytest.fixture(scope="module")
def outcome(spark, conf, tmp_path_factory):
    root = tmp_path_factory.mktemp("components")
    paths = slice_files(root, STORED, NEW)
    full = job.run(spark, paths["all"], str(root / "full"), conf, load_pg=False)
    runs = {}
    for mode in ("components", "rounds"):
        out = str(root / mode)
        job.run(spark, paths["stored"], out, conf, load_pg=False)
        runs[mode] = (out, job.run(spark, paths["new"], out, conf.with_overrides({"input": {"closure": mode}}),
                                   load_pg=False))
    return root, paths, keyset(store.read(spark, str(root / "full"), "duplicate_links")), full, runs


def test_the_closure_by_components_ends_with_the_links_of_one_run(outcome, spark):
    _, _, whole, _, runs = outcome
    # The relations the components must carry: y -> x once x is first of its text, z -> x2 likewise.
    assert {(d, c, s) for d, c, s, _ in whole} == {(100, 200, "url"), (102, 101, "simhash"), (110, 210, "url"),
                                                   (112, 111, "simhash")}
    out, report = runs["components"]
    assert keyset(store.active_links(spark, out)) == whole
    assert report.counts["incremental.by_components"] == 1
    # The slice's pass, then x2's (unsettled); the lone document is never touched.
    assert report.counts["incremental.keys_passes"] == 2
    assert report.counts["incremental.affected_documents"] == 8


def test_rounds_give_the_same_links_with_a_pass_per_round(outcome, spark):
    _, _, whole, _, runs = outcome
    out, report = runs["rounds"]
    assert keyset(store.active_links(spark, out)) == whole
    assert report.counts["incremental.by_components"] == 0
    # A pass per round, and the last one, which adds nothing.
    assert report.counts["incremental.keys_passes"] == report.counts["incremental.rounds"] + 1 >= 4


def test_every_stored_document_has_its_component_after_each_run(outcome, spark):
    _, _, _, full, runs = outcome
    out, _ = runs["components"]
    rows = {r.id: (r.component, r.settled) for r in store.read(spark, out, "components").collect()}
    assert set(rows) == {r["id"] for r in STORED + NEW}
    assert rows[102] == rows[101] == (101, True) and rows[100] == (100, True)   # {100, 200} after the slice
    assert rows[111] == (111, True)      # first of its text now: its pairs are its own
    assert rows[120] == (120, True)
    whole = {r.id: r.component for r in store.read(spark, str(outcome[0] / "full"), "components").collect()}
    assert {i: c for i, (c, _) in rows.items()} == whole     # the same components as one run's


def test_an_output_without_components_takes_rounds_and_says_why(outcome, spark, conf, tmp_path):
    import shutil

    root, paths, whole, _, _ = outcome
    out = str(tmp_path / "old")
    job.run(spark, paths["stored"], out, conf, load_pg=False)
    shutil.rmtree(tmp_path / "old" / "components")     # as written before components existed
    report = job.run(spark, paths["new"], out, conf, load_pg=False)
    assert report.counts["incremental.by_components"] == 0
    assert any("closure by rounds: no components stored" in n for n in report.notes)
    assert keyset(store.active_links(spark, out)) == whole
