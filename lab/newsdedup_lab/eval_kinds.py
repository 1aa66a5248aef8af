"""Per stage (cumulative) and per language and kind: pairwise precision / recall / F1 of the
duplicate kinds, and how many must-not-link pairs ended up in one cluster.

For a document d of a duplicate kind (truth rows with parent_id > 0 whose kind is not a
must-not-link kind), the predicted pairs are (d, x) for every x in d's predicted cluster;
true pairs are those with x in d's true cluster. precision = true predicted / predicted,
recall = true predicted / (true cluster size - 1), summed over the kind's documents.

Must-not-link pairs come from a pairs table (a, b, kind[, lang]) when the corpus has one
(lab/realtext.py writes must_not_link.parquet), plus truth rows of a must-not-link kind
(hard_negative, template_report) paired with their parent_id.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Sequence

import pandas as pd

from newsdedup.stages import STAGE_NAMES

MUST_NOT_LINK_KINDS = ("hard_negative", "template_report", "neighbour_id", "same_topic")


class UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        root = self.parent.setdefault(x, x)
        while root != self.parent[root]:
            root = self.parent[root]
        while x != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def must_not_link_pairs(truth: pd.DataFrame, pairs: pd.DataFrame | None) -> pd.DataFrame:
    """a, b, kind, lang of every pair that must stay apart."""
    lang = dict(zip(truth["id"].astype(int), truth["lang"]))
    rows = truth[truth["kind"].isin(MUST_NOT_LINK_KINDS) & (truth["parent_id"] > 0)]
    out = pd.DataFrame({"a": rows["parent_id"].astype(int), "b": rows["id"].astype(int), "kind": rows["kind"]})
    if pairs is not None and len(pairs):
        extra = pairs[["a", "b", "kind"]].astype({"a": int, "b": int})
        out = pd.concat([out, extra], ignore_index=True).drop_duplicates(["a", "b"])
    out["lang"] = [lang.get(a, "?") for a in out["a"]]
    return out.reset_index(drop=True)


def _scores(truth: pd.DataFrame, uf: UnionFind, mnl: pd.DataFrame, stage: str) -> list[dict[str, Any]]:
    ids = truth["id"].astype(int).to_numpy()
    cluster = dict(zip(ids, truth["cluster_id"].astype(int)))
    roots = {i: uf.find(i) for i in ids}
    comp_size = Counter(roots.values())
    comp_cluster = Counter((roots[i], cluster[i]) for i in ids)
    true_size = Counter(cluster.values())
    rows = []
    dups = truth[(truth["parent_id"] > 0) & ~truth["kind"].isin(MUST_NOT_LINK_KINDS)]
    for (lang, kind), grp in dups.groupby(["lang", "kind"], sort=True):
        pred = tp = want = joined = 0
        for d, p in zip(grp["id"].astype(int), grp["parent_id"].astype(int)):
            r, c = roots[d], cluster[d]
            pred += comp_size[r] - 1
            tp += comp_cluster[(r, c)] - 1
            want += true_size[c] - 1
            joined += roots.get(p, p) == r
        prec = tp / pred if pred else float("nan")
        rec = tp / want if want else float("nan")
        f1 = 2 * prec * rec / (prec + rec) if pred and want and prec + rec else float("nan")
        rows.append({"stage": stage, "lang": lang, "kind": kind, "n": len(grp), "precision": prec, "recall": rec,
                     "f1": f1, "joined_to_parent": joined, "linked_must_not": None})
    for (lang, kind), grp in mnl.groupby(["lang", "kind"], sort=True):
        linked = sum(uf.find(a) == uf.find(b) for a, b in zip(grp["a"], grp["b"]))
        rows.append({"stage": stage, "lang": lang, "kind": kind, "n": len(grp), "precision": None, "recall": None,
                     "f1": None, "joined_to_parent": None, "linked_must_not": int(linked)})
    return rows


def stage_kind_metrics(truth: pd.DataFrame, links: Iterable[tuple[int, int, str]],
                       pairs: pd.DataFrame | None = None,
                       stages: Sequence[str] = STAGE_NAMES) -> list[dict[str, Any]]:
    """Rows per stage (cumulative: the links of this stage and all before it), language and kind."""
    by_stage: dict[str, list[tuple[int, int]]] = {}
    for dup, canon, stage in links:
        by_stage.setdefault(stage, []).append((int(dup), int(canon)))
    order = [s for s in stages if s in by_stage] + sorted(s for s in by_stage if s not in stages)
    mnl = must_not_link_pairs(truth, pairs)
    uf = UnionFind()
    rows: list[dict[str, Any]] = []
    for stage in order:
        for dup, canon in by_stage[stage]:
            uf.union(dup, canon)
        rows.extend(_scores(truth, uf, mnl, stage))
    if not order:
        rows.extend(_scores(truth, uf, mnl, "none"))
    return rows


KIND_STAGE_COLUMNS = ("stage", "lang", "kind", "n", "precision", "recall", "f1", "joined_to_parent",
                      "linked_must_not")
