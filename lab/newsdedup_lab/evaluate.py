"""Quality of the cascade against a labelled corpus (see synth.py).

Pairwise metrics: a predicted pair is two documents that the links put into
the same cluster (links chain: a stage-1 canonical may itself be linked by a
later stage). Links are replayed stage by stage through a union-find; the
pairs a stage's links newly join are attributed to that stage, so each
stage gets its own precision, and recall is reported cumulatively (the
share of all true pairs found by the cascade up to and including a stage).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from newsdedup.stages import STAGE_NAMES
from .eval_kinds import MUST_NOT_LINK_KINDS

if TYPE_CHECKING:
    from newsdedup.config import Config
NEAR_KINDS = ("typo", "appended_update", "headline_change")


# --------------------------------------------------------------------------- pairwise metrics

class Clusters:
    """Union-find over documents that tracks, per component, how many members each true cluster has."""

    def __init__(self, truth: Mapping[int, int]):
        self.truth = truth
        self.parent: dict[int, int] = {}
        self.members: dict[int, Counter] = {}

    def find(self, x: int) -> int:
        root = self.parent.setdefault(x, x)
        while root != self.parent[root]:
            root = self.parent[root]
        while x != root:                       # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def _counter(self, root: int) -> Counter:
        if root not in self.members:
            self.members[root] = Counter({self.truth.get(root, ("unlabelled", root)): 1})
        return self.members[root]

    def union(self, a: int, b: int) -> tuple[int, int]:
        """Join the components of a and b; returns (new pairs, of which truly duplicate)."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return 0, 0
        ca, cb = self._counter(ra), self._counter(rb)
        if sum(ca.values()) < sum(cb.values()):
            ra, rb, ca, cb = rb, ra, cb, ca
        new = sum(ca.values()) * sum(cb.values())
        tp = sum(n * ca.get(c, 0) for c, n in cb.items())
        ca.update(cb)
        del self.members[rb]
        self.parent[rb] = ra
        return new, tp


def true_pair_count(truth: Mapping[int, int]) -> int:
    sizes = Counter(truth.values())
    return sum(n * (n - 1) // 2 for n in sizes.values())


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def f1(p: float, r: float) -> float:
    if math.isnan(p) or math.isnan(r) or p + r == 0:
        return float("nan")
    return 2 * p * r / (p + r)


def pair_metrics(truth: Mapping[int, int], links: Iterable[tuple[int, int, str]],
                 stages: Sequence[str] = STAGE_NAMES) -> tuple[list[dict[str, Any]], Clusters]:
    """Per-stage and overall pairwise precision / recall / F1.

    truth: document id -> true cluster id. links: (duplicate_id, canonical_id, stage).
    Returns rows (one per stage that has links or is known, then 'overall') and the final clusters.
    """
    by_stage: dict[str, list[tuple[int, int]]] = {}
    for dup, canon, stage in links:
        by_stage.setdefault(stage, []).append((int(dup), int(canon)))
    order = [s for s in stages if s in by_stage] + sorted(s for s in by_stage if s not in stages)
    total_true = true_pair_count(truth)
    uf = Clusters(truth)
    rows, cum_pred, cum_tp = [], 0, 0
    for stage in order:
        pred = tp = 0
        for dup, canon in by_stage[stage]:
            n, t = uf.union(dup, canon)
            pred += n
            tp += t
        cum_pred += pred
        cum_tp += tp
        p, r = _ratio(tp, pred), _ratio(cum_tp, total_true)
        rows.append({"stage": stage, "links": len(by_stage[stage]), "pred_pairs": pred, "true_pairs_found": tp,
                     "precision": p, "recall_stage": _ratio(tp, total_true), "recall_cumulative": r,
                     "f1_cumulative": f1(_ratio(cum_tp, cum_pred), r)})
    p, r = _ratio(cum_tp, cum_pred), _ratio(cum_tp, total_true)
    rows.append({"stage": "overall", "links": sum(len(v) for v in by_stage.values()), "pred_pairs": cum_pred,
                 "true_pairs_found": cum_tp, "precision": p, "recall_stage": r, "recall_cumulative": r,
                 "f1_cumulative": f1(p, r)})
    return rows, uf


def kind_recall(truth: pd.DataFrame, uf: Clusters) -> list[dict[str, Any]]:
    """Per variant kind: share of documents found in the same predicted cluster as their parent.

    For hard negatives the same number is a false merge rate (they must stay apart).
    """
    rows = []
    derived = truth[truth["parent_id"] > 0]
    for kind, grp in derived.groupby("kind", sort=True):
        joined = sum(uf.find(int(i)) == uf.find(int(p)) for i, p in zip(grp["id"], grp["parent_id"]))
        label = "false_merge_rate" if kind in MUST_NOT_LINK_KINDS else "recall"
        rows.append({"kind": kind, "documents": len(grp), "joined_to_parent": int(joined),
                     "measure": label, "value": joined / len(grp)})
    return rows


# --------------------------------------------------------------------------- simhash distances

def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bit differences between signed 64-bit fingerprints, element-wise."""
    return np.bitwise_count(a.astype(np.int64).view(np.uint64) ^ b.astype(np.int64).view(np.uint64)).astype(int)


def _pairs_within(groups: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """All (i < j) index pairs inside each group of row positions."""
    a, b = [], []
    for idx in groups:
        idx = np.asarray(idx)
        if len(idx) < 2:
            continue
        ii, jj = np.triu_indices(len(idx), k=1)
        a.append(idx[ii])
        b.append(idx[jj])
    if not a:
        return np.empty(0, int), np.empty(0, int)
    return np.concatenate(a), np.concatenate(b)


# A pair inside a true cluster is labelled by its harder member: (typo, rewrite) is a rewrite pair.
_PAIR_PRIORITY = {k: i for i, k in enumerate(("origin", "url_variant", "syndicated", "nfd", "typo",
                                               "appended_update", "headline_change", "rewrite"))}


def _pair_kind(ka: np.ndarray, kb: np.ndarray) -> np.ndarray:
    pa_, pb_ = (np.array([_PAIR_PRIORITY.get(k, 0) for k in ks]) for ks in (ka, kb))
    return np.where(pa_ >= pb_, ka, kb)


def _band_pairs(sim: np.ndarray, langs: np.ndarray, n_bands: int, max_bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (i < j) row pairs that share a band value within a language, as the band join sees them."""
    u = sim.view(np.uint64)
    width = 64 // n_bands
    found = []
    for band in range(n_bands):
        values = (u >> np.uint64(width * band)) & np.uint64((1 << width) - 1)
        groups = pd.DataFrame({"lang": langs, "v": values}).groupby(["lang", "v"]).indices.values()
        a, b = _pairs_within(g for g in groups if 2 <= len(g) <= max_bucket)
        found.append(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))
    pairs = np.unique(np.concatenate(found), axis=0) if found else np.empty((0, 2), int)
    return pairs[:, 0], pairs[:, 1]


def distance_samples(fps: pd.DataFrame, truth: pd.DataFrame, n_bands: int = 4,
                     max_bucket: int = 200) -> pd.DataFrame:
    """Hamming distances of labelled pairs: every pair inside a true cluster (kind: the harder
    variant of the two), and every non-duplicate pair the band join would consider because it
    shares a band value (kind hard_negative when both come from the same template, else
    band_candidate), plus each hard negative against the item whose template it copies.

    fps: id, lang, simhash (documents with a fingerprint). Returns lang, kind, duplicate, distance.
    """
    cols = ["id", "cluster_id", "kind", "parent_id", "template_id"]
    df = fps.dropna(subset=["simhash"]).merge(truth[cols], on="id").reset_index(drop=True)
    sim = df["simhash"].astype(np.int64).to_numpy()
    lang, kind = df["lang"].to_numpy(), df["kind"].to_numpy()
    cluster, template = df["cluster_id"].to_numpy(), df["template_id"].to_numpy()
    out = []

    a, b = _pairs_within(df.groupby("cluster_id").indices.values())
    out.append(pd.DataFrame({"lang": lang[a], "kind": _pair_kind(kind[a], kind[b]), "duplicate": True,
                             "distance": hamming(sim[a], sim[b])}))

    pos = pd.Series(df.index, index=df["id"])
    hn = df[(df["kind"] == "hard_negative") & df["parent_id"].isin(pos.index)]
    hi, hj = hn.index.to_numpy(), pos.loc[hn["parent_id"]].to_numpy().astype(int)
    a, b = _band_pairs(sim, lang, n_bands, max_bucket)
    keep = cluster[a] != cluster[b]
    a, b = a[keep], b[keep]
    # Hard negatives vs. their template's origin, whether or not they share a band; then the rest.
    listed = set(zip(np.minimum(hi, hj).tolist(), np.maximum(hi, hj).tolist()))
    extra = np.array([(x, y) not in listed for x, y in zip(a.tolist(), b.tolist())], dtype=bool)
    a, b = np.concatenate([hi, a[extra]]), np.concatenate([hj, b[extra]])
    same_template = template[a] == template[b]
    out.append(pd.DataFrame({"lang": lang[a], "kind": np.where(same_template, "hard_negative", "band_candidate"),
                             "duplicate": False, "distance": hamming(sim[a], sim[b])}))
    return pd.concat(out, ignore_index=True)


def threshold_sweep(samples: pd.DataFrame, max_distance: int = 8,
                    kinds: Sequence[str] = NEAR_KINDS) -> pd.DataFrame:
    """Per language and candidate threshold t: near-duplicate pairs within t (recall among the
    near-duplicate kinds) and non-duplicate pairs within t (false pairs the stage would make)."""
    rows = []
    for lang, grp in samples.groupby("lang"):
        near = grp[grp["duplicate"] & grp["kind"].isin(kinds)]["distance"].to_numpy()
        neg = grp[~grp["duplicate"]]["distance"].to_numpy()
        for t in range(max_distance + 1):
            rows.append({"lang": lang, "max_hamming": t, "near_dup_pairs": len(near),
                         "near_dup_recall": float((near <= t).mean()) if len(near) else float("nan"),
                         "non_dup_within": int((neg <= t).sum()),
                         "hard_negatives_within": int((grp[~grp["duplicate"] & (grp["kind"] == "hard_negative")]
                                                       ["distance"] <= t).sum())})
    return pd.DataFrame(rows)


def plot_distances(samples: pd.DataFrame, thresholds: Mapping[str, int], path: str | Path,
                   max_distance: int = 24) -> Path:
    """Histograms of Hamming distance near the threshold, per language: near duplicates,
    rewrites, hard negatives and other band candidates, with the configured threshold marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    langs = sorted(samples["lang"].unique()) or ["en"]
    fig, axes = plt.subplots(1, len(langs), figsize=(6.5 * len(langs), 4.2), squeeze=False)
    bins = np.arange(-0.5, max_distance + 1.5, 1.0)
    series = [("near duplicates (typo, update, headline)", lambda g: g["duplicate"] & g["kind"].isin(NEAR_KINDS),
               "tab:green"),
              ("rewrites (same event)", lambda g: g["duplicate"] & (g["kind"] == "rewrite"), "tab:olive"),
              ("hard negatives (same template)", lambda g: ~g["duplicate"] & (g["kind"] == "hard_negative"),
               "tab:red"),
              ("other non-duplicates sharing a band", lambda g: ~g["duplicate"] & (g["kind"] == "band_candidate"),
               "tab:gray")]
    for ax, lang in zip(axes[0], langs):
        grp = samples[samples["lang"] == lang]
        for label, select, color in series:
            d = grp[select(grp)]["distance"].clip(upper=max_distance + 1)
            if len(d):
                ax.hist(d, bins=bins, alpha=0.55, label=f"{label} (n={len(d)})", color=color)
        t = thresholds.get(lang, thresholds.get("default"))
        if t is not None:
            ax.axvline(t + 0.5, color="black", linestyle="--", label=f"max_hamming = {t}")
        ax.set_yscale("log")
        ax.set_xlim(-0.5, max_distance + 0.5)
        ax.set_xlabel("SimHash Hamming distance (64 bits)")
        ax.set_ylabel("pairs (log)")
        ax.set_title(f"lang = {lang}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- end to end

@dataclass
class Evaluation:
    stages: list[dict[str, Any]]
    kinds: list[dict[str, Any]]
    sweep: pd.DataFrame
    samples: pd.DataFrame
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    kind_stages: list[dict[str, Any]] = field(default_factory=list)   # eval_kinds.stage_kind_metrics
    languages: list[dict[str, Any]] = field(default_factory=list)     # pair metrics per language

    def stage(self, name: str) -> dict[str, Any]:
        return next(r for r in self.stages if r["stage"] == name)

    def kind(self, name: str) -> float:
        return next(r["value"] for r in self.kinds if r["kind"] == name)

    def to_json(self) -> str:
        return json.dumps({"stages": self.stages, "kinds": self.kinds, "counts": self.counts,
                           "seconds": self.seconds, "kind_stages": self.kind_stages,
                           "languages": self.languages,
                           "sweep": self.sweep.to_dict("records")}, indent=2, default=float)


def per_language(truth: pd.DataFrame, links: pd.DataFrame) -> list[dict[str, Any]]:
    """Overall pairwise metrics per language (links whose duplicate is of that language)."""
    rows = []
    lang_of = dict(zip(truth["id"].astype(int), truth["lang"]))
    for lang, grp in truth.groupby("lang", sort=True):
        mine = links[[lang_of.get(int(d)) == lang for d in links["duplicate_id"]]]
        stage_rows, _ = pair_metrics(dict(zip(grp["id"].astype(int), grp["cluster_id"].astype(int))),
                                     mine.itertuples(index=False, name=None))
        rows.append({"lang": lang, **stage_rows[-1]})
    return rows


def evaluate(spark, raw, truth: pd.DataFrame, conf: "Config", pairs: pd.DataFrame | None = None) -> Evaluation:
    """Run the cascade in memory on raw (the job's input schema) and score it against truth
    (and against must-not-link pairs a, b, kind when given)."""
    from .eval_kinds import stage_kind_metrics

    from pyspark.sql import functions as F

    from newsdedup.cascade import run_cascade
    from newsdedup.report import RunReport as Report

    report = Report(run_id="eval")
    result = run_cascade(spark, raw, conf, report)
    links = result.links.select("duplicate_id", "canonical_id", "stage").toPandas()
    fps = result.documents.select("id", "lang", "simhash").where(F.col("simhash").isNotNull()).toPandas()
    truth_map = dict(zip(truth["id"].astype(int), truth["cluster_id"].astype(int)))
    stages, uf = pair_metrics(truth_map, links.itertuples(index=False, name=None))
    samples = distance_samples(fps, truth, conf.simhash.bands)
    return Evaluation(stages=stages, kinds=kind_recall(truth, uf), sweep=threshold_sweep(samples),
                      samples=samples, counts=dict(report.counts), seconds=dict(report.seconds),
                      kind_stages=stage_kind_metrics(truth, links.itertuples(index=False, name=None), pairs),
                      languages=per_language(truth, links))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


STAGE_COLUMNS = ("stage", "links", "pred_pairs", "true_pairs_found", "precision", "recall_stage",
                 "recall_cumulative", "f1_cumulative")
KIND_COLUMNS = ("kind", "documents", "joined_to_parent", "measure", "value")
SWEEP_COLUMNS = ("lang", "max_hamming", "near_dup_pairs", "near_dup_recall", "non_dup_within",
                 "hard_negatives_within")


def report_text(ev: Evaluation) -> str:
    from .eval_kinds import KIND_STAGE_COLUMNS

    return "\n\n".join([
        "Pairwise precision / recall per stage (recall_stage: share of all true pairs this stage found)",
        markdown_table(ev.stages, STAGE_COLUMNS),
        "Overall pairwise precision / recall / F1 per language",
        markdown_table(ev.languages, ("lang", *STAGE_COLUMNS[1:])),
        "Per stage (cumulative), language and kind: pairwise P/R/F1 of duplicate kinds; "
        "must-not-link pairs put in one cluster (linked_must_not)",
        markdown_table(ev.kind_stages, KIND_STAGE_COLUMNS),
        "Per variant kind (document joined to the document it was derived from)",
        markdown_table(ev.kinds, KIND_COLUMNS),
        "SimHash threshold sweep (near-duplicate kinds vs. non-duplicate pairs)",
        markdown_table(ev.sweep.to_dict("records"), SWEEP_COLUMNS),
    ])


def thresholds_of(conf: "Config") -> dict[str, int]:
    return {k: v.max_hamming for k, v in conf.simhash.languages.items()}


def run_eval(spark, conf: "Config", output: str | Path, *, n_docs: int = 5000, seed: int = 7,
             input_path: str | None = None, truth_path: str | None = None,
             plot: str | Path | None = None, must_not_link_path: str | None = None) -> Evaluation:
    """Generate a corpus under output (unless input/truth are given), evaluate, write
    output/eval.json and the distance plot (default output/simhash_distances.png)."""
    from newsdedup.io.input import read_input
    from . import synth

    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    if input_path is None:
        input_path, truth_path = (str(p) for p in synth.write(n_docs, out / "corpus", seed=seed))
    elif truth_path is None:
        raise ValueError("--input needs --truth (the ground-truth Parquet written with the corpus)")
    truth = pd.read_parquet(truth_path)
    raw = read_input(spark, str(input_path))
    cores = spark.sparkContext.defaultParallelism
    if raw.rdd.getNumPartitions() < cores:   # a small corpus is one row group: use every core
        raw = raw.repartition(cores)
    pairs = pd.read_parquet(must_not_link_path) if must_not_link_path else None
    ev = evaluate(spark, raw, truth, conf, pairs)
    (out / "eval.json").write_text(ev.to_json(), encoding="utf-8")
    plot_distances(ev.samples, thresholds_of(conf), plot or out / "simhash_distances.png")
    return ev
