"""`newsdedup calibrate`: stage-4 thresholds per model_version and language pair from labelled pairs.

A pair is two texts with a label: 1 the same event written independently, 0
two different events (the same outlet's template, or the same topic). Every
pair is scored as stage 4 scores it: the cosine of the model's unit vectors,
then the evidence check (stages/semantic/evidence.py: scores, days, numbers, names, with
`published_a`/`published_b` resolving "yesterday" and weekdays). Precision and
recall are computed per threshold and per language pair (en-en, bn-bn, en-bn),
with 95% Wilson intervals at the chosen threshold. The threshold chosen for a
language pair is the lowest whose precision reaches the target and stays there
above it; the default target is 1.0: on the labelled set, no link between two
different events.

Writes <output>/calibration.json, calibration.png (precision/recall per
threshold and the score distributions) and calibration.yaml, a conf snippet
(`--conf` it, or copy it into conf/default.yaml) that stores the thresholds
under semantic.models.<model>.calibrated.<model_version>.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from newsdedup.errors import UserError
from newsdedup.stages.semantic import embeddings as emb
from newsdedup.stages.semantic.evidence import REASONS, facts_of, refusal
from newsdedup.stages.semantic.search import lang_pair

if TYPE_CHECKING:
    from newsdedup.config import EvidenceConfig, SemanticConfig

# Steps of 0.005: some models (multilingual-e5) place every pair of one language within a few hundredths.
GRID = np.round(np.arange(0.30, 1.0001, 0.005), 3)
TARGET_PRECISION = 1.0
# Above every cosine: a language pair whose target no threshold reaches is, in effect, not linked.
NEVER = 1.0


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n ((0, 1) when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Calibration:
    version: str
    spec_key: str
    languages: list[str]
    cross_language: bool
    pairs: int
    target: float
    sweeps: dict[str, pd.DataFrame]                # language pair -> threshold sweep (evidence applied)
    unguarded: dict[str, pd.DataFrame]             # the same on the cosine alone
    chosen: dict[str, float | None]                # language pair -> threshold (None: not covered)
    covered: dict[str, bool]
    refused: dict[str, dict[str, int]]             # language pair -> reason -> labelled pairs refused
    heldout: dict[str, dict[str, int]]             # language pair -> tp/fp/fn of thresholds chosen on other folds
    files: dict[str, str] = field(default_factory=dict)
    scored: pd.DataFrame | None = None


def load_pairs(path: str | Path) -> pd.DataFrame:
    """Labelled pairs (JSON lines: label, lang_a, lang_b, text_a, text_b; optional published_a/_b, kind)."""
    try:
        pairs = pd.read_json(path, lines=True, dtype=False)
    except (OSError, ValueError) as exc:
        raise UserError(f"--pairs {path}: cannot read labelled pairs ({exc})") from None
    need = {"label", "lang_a", "lang_b", "text_a", "text_b"}
    if not need <= set(pairs.columns):
        raise UserError(f"--pairs {path}: expected JSON lines with {', '.join(sorted(need))}")
    for side in ("a", "b"):
        col = f"published_{side}"
        # A time without a zone is UTC, as the job reads it (input.naive_timezone's default).
        pairs[col] = pd.to_datetime(pairs[col], utc=True, format="ISO8601") if col in pairs else pd.NaT
    pairs["langs"] = [lang_pair(a, b) for a, b in zip(pairs["lang_a"], pairs["lang_b"])]
    return pairs


def cosines(model, pairs: pd.DataFrame, batch_size: int) -> np.ndarray:
    """Cosine of every pair, each distinct text embedded once."""
    texts = sorted(set(pairs["text_a"]) | set(pairs["text_b"]))
    index = {t: i for i, t in enumerate(texts)}
    vecs = emb.encode(model, texts, batch_size)
    a = vecs[[index[t] for t in pairs["text_a"]]]
    b = vecs[[index[t] for t in pairs["text_b"]]]
    return np.clip(np.einsum("ij,ij->i", a, b), -1.0, 1.0)


def refusals(pairs: pd.DataFrame, rules: "EvidenceConfig") -> list[str | None]:
    """The evidence's verdict on every pair, as stage 4 reaches it (None: the facts allow a link)."""
    def when(value) -> datetime | None:
        return None if value is None or pd.isna(value) else pd.Timestamp(value).to_pydatetime()

    out = []
    for r in pairs.itertuples():
        fa = facts_of(r.text_a, when(r.published_a), rules.timezone, rules.lead_chars)
        fb = facts_of(r.text_b, when(r.published_b), rules.timezone, rules.lead_chars)
        out.append(refusal(fa, fb, rules, r.lang_a == r.lang_b))
    return out


def rates(tp: int, fp: int, fn: int) -> tuple[float, float]:
    """(precision, recall); precision 1.0 when nothing is predicted, recall 0.0 when nothing is to be found."""
    return tp / (tp + fp) if tp + fp else 1.0, tp / (tp + fn) if tp + fn else 0.0


def sweep(labels: np.ndarray, scores: np.ndarray, vetoed: np.ndarray | None = None) -> pd.DataFrame:
    """tp, fp, fn, precision, recall, f1 per threshold of GRID (a vetoed pair is never predicted)."""
    vetoed = np.zeros(len(labels), bool) if vetoed is None else vetoed
    rows = []
    for t in GRID:
        pred = (scores >= t) & ~vetoed
        tp, fp = int(np.sum(pred & (labels == 1))), int(np.sum(pred & (labels == 0)))
        fn = int(np.sum(~pred & (labels == 1)))
        p, r = rates(tp, fp, fn)
        rows.append((float(t), tp, fp, fn, p, r, 2 * p * r / (p + r) if p + r else 0.0))
    return pd.DataFrame(rows, columns=["threshold", "tp", "fp", "fn", "precision", "recall", "f1"])


def choose(sw: pd.DataFrame, target: float = TARGET_PRECISION) -> float | None:
    """The lowest threshold whose precision reaches target and stays there above it; None if none does."""
    ok = sw["precision"].to_numpy() >= target
    stays = np.flip(np.logical_and.accumulate(np.flip(ok)))
    hits = sw["threshold"][stays & (sw["tp"].to_numpy() > 0)]
    return float(hits.iloc[0]) if len(hits) else None


def heldout(g: pd.DataFrame, target: float, folds: int = 2) -> dict[str, int]:
    """tp, fp, fn of thresholds chosen on the other folds, counted on each fold in turn.

    The chosen threshold is fitted to the pairs it is measured on; this says how it does on
    pairs it was not chosen on. Folds by a stable hash of pair_id (the row number without one).
    """
    keys = g["pair_id"].astype(str) if "pair_id" in g else pd.Series(range(len(g)), index=g.index).astype(str)
    fold = keys.map(lambda k: int(hashlib.sha256(k.encode()).hexdigest(), 16) % folds)
    def swept(part: pd.DataFrame) -> pd.DataFrame:
        return sweep(part["label"].to_numpy(), part["cosine"].to_numpy(), part["refusal"].notna().to_numpy())

    out = {"tp": 0, "fp": 0, "fn": 0}
    for f in range(folds):
        t = choose(swept(g[fold != f]), target)
        row = at(swept(g[fold == f]), NEVER if t is None else t)
        for k in out:
            out[k] += int(row[k])
    return out


def _covered(lp: str, languages: set[str], cross: bool) -> bool:
    a, b = lp.split("-")
    return {a, b} <= languages and (a == b or cross)


def run(sem: "SemanticConfig", pairs_path: str, output: str, *, model: str | None = None,
        model_version: str | None = None, device: str | None = None, target: float = TARGET_PRECISION,
        cross_language: bool | None = None) -> Calibration:
    if model:
        sem = dataclasses.replace(sem, model=model, fallback_model=None, revision=None, model_version=model_version)
    elif model_version:
        sem = dataclasses.replace(sem, model_version=model_version)
    if device:
        sem = dataclasses.replace(sem, device=device)
    resolved = emb.resolve(sem, with_thresholds=False)
    langs = set(resolved.spec.languages)
    cross = resolved.spec.cross_language if cross_language is None else cross_language
    pairs = load_pairs(pairs_path)
    pairs["cosine"] = cosines(emb.model_for(resolved.sem), pairs, resolved.sem.batch_size)
    pairs["refusal"] = refusals(pairs, sem.evidence)
    covered = {lp: _covered(lp, langs, cross) for lp in sorted(pairs["langs"].unique())}
    sweeps, unguarded, chosen, refused, held = {}, {}, {}, {}, {}
    for lp, is_covered in covered.items():
        g = pairs[pairs["langs"] == lp]
        labels, scores, vetoed = g["label"].to_numpy(), g["cosine"].to_numpy(), g["refusal"].notna().to_numpy()
        sweeps[lp], unguarded[lp] = sweep(labels, scores, vetoed), sweep(labels, scores)
        refused[lp] = {f"{reason} ({'same' if lb else 'different'} event)":
                       int(((g["refusal"] == reason) & (g["label"] == lb)).sum())
                       for reason in REASONS for lb in (1, 0)}
        if is_covered:
            chosen[lp] = choose(sweeps[lp], target)
            held[lp] = heldout(g, target)
    cal = Calibration(resolved.version, resolved.spec_key, sorted(langs), cross, len(pairs), target, sweeps,
                      unguarded, chosen, covered, refused, held, scored=pairs)
    write(cal, Path(output))
    return cal


def at(sw: pd.DataFrame, t: float | None) -> pd.Series | None:
    if t is None:
        return None
    return sw.iloc[int(np.argmin(np.abs(sw["threshold"].to_numpy() - t)))]


def thresholds(cal: Calibration) -> dict:
    """The conf entry for this model_version: same_language/cross_language plus each language pair's own.

    A covered pair whose target no threshold reaches gets NEVER: its documents are embedded but
    not linked, and the note in the report says so.
    """
    per_pair = {lp: (NEVER if t is None else t) for lp, t in cal.chosen.items()}
    same = [v for lp, v in per_pair.items() if len(set(lp.split("-"))) == 1]
    cross = [v for lp, v in per_pair.items() if len(set(lp.split("-"))) == 2]
    out: dict = {"same_language": max(same) if same else NEVER}
    if cal.cross_language:
        out["cross_language"] = max(cross) if cross else NEVER
    out["pairs"] = per_pair
    return out


def snippet(cal: Calibration) -> str:
    thr = thresholds(cal)
    pairs = ", ".join(f"{k}: {round(v, 3)}" for k, v in sorted(thr.pop("pairs").items()))
    inner = ", ".join(f"{k}: {round(v, 3)}" for k, v in thr.items()) + (f", pairs: {{{pairs}}}" if pairs else "")
    return (f"# newsdedup calibrate ({cal.pairs} labelled pairs, target precision {cal.target})\n"
            f"semantic:\n  models:\n    {cal.spec_key}:\n      calibrated:\n        {cal.version}: {{{inner}}}\n")


def summary(cal: Calibration) -> dict[str, dict]:
    """Per language pair at its chosen threshold: counts, precision and recall with 95% intervals."""
    out = {}
    for lp, sw in cal.sweeps.items():
        t = cal.chosen.get(lp)
        pos = int(sw["tp"].iloc[0] + sw["fn"].iloc[0])
        neg = int(((cal.scored["langs"] == lp) & (cal.scored["label"] == 0)).sum())
        row = {"pairs": pos + neg, "same_event": pos, "different_event": neg, "covered": cal.covered[lp],
               "threshold": t}
        if t is not None:
            r = at(sw, t)
            tp, fp, fn = int(r["tp"]), int(r["fp"]), int(r["fn"])
            row.update(tp=tp, fp=fp, fn=fn, precision=r["precision"], precision_ci=wilson(tp, tp + fp),
                       recall=r["recall"], recall_ci=wilson(tp, tp + fn),
                       different_event_linked_ci=wilson(fp, neg))
        if lp in cal.heldout:
            h = cal.heldout[lp]
            p, r = rates(h["tp"], h["fp"], h["fn"])
            row["heldout"] = {**h, "precision": p, "recall": r, "precision_ci": wilson(h["tp"], h["tp"] + h["fp"]),
                              "recall_ci": wilson(h["tp"], h["tp"] + h["fn"])}
        out[lp] = row
    return out


def write(cal: Calibration, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"model_version": cal.version, "model": cal.spec_key, "pairs": cal.pairs, "target": cal.target,
           "chosen": cal.chosen, "thresholds": thresholds(cal), "covered": cal.covered,
           "summary": summary(cal), "refused": cal.refused,
           "sweeps": {k: v.to_dict("records") for k, v in cal.sweeps.items()},
           "unguarded": {k: v.to_dict("records") for k, v in cal.unguarded.items()}}
    (out / "calibration.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    (out / "calibration.yaml").write_text(snippet(cal), encoding="utf-8")
    cal.files["yaml"] = str(out / "calibration.yaml")
    cal.files["json"] = str(out / "calibration.json")
    cal.files["png"] = str(plot(cal, out / "calibration.png"))


def plot(cal: Calibration, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(cal.sweeps)
    fig, axes = plt.subplots(2, len(names), figsize=(4.2 * len(names), 7), squeeze=False)
    for i, name in enumerate(names):
        sw, ax = cal.sweeps[name], axes[0][i]
        ax.plot(sw["threshold"], sw["precision"], label="precision")
        ax.plot(sw["threshold"], sw["recall"], label="recall")
        ax.plot(sw["threshold"], cal.unguarded[name]["precision"], ":", label="precision, cosine alone")
        if cal.chosen.get(name) is not None:
            ax.axvline(cal.chosen[name], color="k", lw=0.8)
        ax.set_title(f"{name}" + ("" if cal.covered[name] else " (not covered: never compared)"), fontsize=9)
        ax.set_xlabel("cosine threshold")
        ax.legend(fontsize=7)
        g = cal.scored[cal.scored["langs"] == name]
        hist = axes[1][i]
        for label, kind in ((1, "same event"), (0, "different events")):
            hist.hist(g[g["label"] == label]["cosine"], bins=np.linspace(-0.2, 1, 49), alpha=0.6, label=kind)
        hist.set_xlabel("cosine")
        hist.legend(fontsize=7)
    fig.suptitle(f"{cal.version}: labelled pairs per language pair", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _ci(ci: tuple[float, float]) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def report_text(cal: Calibration) -> str:
    lines = [f"model_version {cal.version} ({cal.spec_key}: languages {', '.join(cal.languages)}; "
             f"cross-language {'yes' if cal.cross_language else 'no'}); {cal.pairs} labelled pairs; "
             f"target precision {cal.target}"]
    summ = summary(cal)
    for name, sw in cal.sweeps.items():
        s = summ[name]
        note = "" if cal.covered[name] else "  (not covered: stage 4 never compares these)"
        lines.append(f"\n{name}: {s['same_event']} same-event, {s['different_event']} different-event pairs{note}")
        lines.append("threshold  precision  recall  f1     fp  fn   precision(cosine alone)  fp(cosine alone)")
        for t in np.round(np.arange(0.50, 1.0, 0.05), 2):
            r, u = at(sw, t), at(cal.unguarded[name], t)
            lines.append(f"{t:9.2f}  {r['precision']:9.3f}  {r['recall']:6.3f}  {r['f1']:.3f}  {int(r['fp']):3d} "
                         f"{int(r['fn']):3d}   {u['precision']:.3f}                    {int(u['fp']):3d}")
        refused = {k: v for k, v in cal.refused[name].items() if v}
        if refused:
            lines.append("evidence refused (any cosine): " + ", ".join(f"{k} {v}" for k, v in refused.items()))
        if not cal.covered[name]:
            continue
        if s["threshold"] is None:
            lines.append(f"chosen {name}: none reaches precision {cal.target}: not linked ({NEVER})")
        else:
            lines.append(f"chosen {name}: {round(s['threshold'], 3)}  precision {s['precision']:.3f} "
                         f"{_ci(s['precision_ci'])}  recall {s['recall']:.3f} {_ci(s['recall_ci'])}  "
                         f"different events linked {s['fp']}/{s['different_event']} "
                         f"{_ci(s['different_event_linked_ci'])}")
        if "heldout" in s:
            h = s["heldout"]
            lines.append(f"held out (threshold chosen on the other half, 2 folds): precision {h['precision']:.3f} "
                         f"{_ci(h['precision_ci'])}  recall {h['recall']:.3f} {_ci(h['recall_ci'])}  "
                         f"different events linked {h['fp']}")
    lines.append("\nwrote " + ", ".join(cal.files.values()))
    return "\n".join(lines)
