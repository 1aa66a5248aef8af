"""`newsdedup calibrate`: stage-4 thresholds per model_version from labelled pairs.

A pair is two texts with a label: 1 the same event written independently, 0
two different events (the same outlet's template, or the same topic). Every
pair is scored with the model stage 4 would run (cosine of unit vectors, then
the number guard as the stage applies it), and precision/recall are computed per
threshold and per language pair. The thresholds chosen are the lowest with
precision >= the target (recall as high as that allows), for same-language
pairs and, when the model compares across languages, for en-bn pairs.

Writes <output>/calibration.json, calibration.png (precision/recall per
threshold and the score distributions) and calibration.yaml, a conf snippet
(`--conf` it, or copy it into conf/default.yaml) that stores the thresholds
under semantic.models.<model>.calibrated.<model_version>.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import UserError
from ..stages import embeddings as emb
from ..stages.semantic_search import number_tokens, numbers_conflict

if TYPE_CHECKING:
    from ..config import SemanticConfig

GRID = np.round(np.arange(0.30, 1.0001, 0.01), 2)
TARGET_PRECISION = 0.95


@dataclass
class Calibration:
    version: str
    spec_key: str
    languages: list[str]
    cross_language: bool
    pairs: int
    sweeps: dict[str, pd.DataFrame]                # language pair -> threshold sweep (number guard applied)
    unguarded: dict[str, pd.DataFrame]             # the same without the number guard
    chosen: dict[str, float | None]                # same_language / cross_language
    covered: dict[str, bool]
    files: dict[str, str] = field(default_factory=dict)
    scored: pd.DataFrame | None = None


def load_pairs(path: str | Path) -> pd.DataFrame:
    try:
        pairs = pd.read_json(path, lines=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"--pairs {path}: cannot read labelled pairs ({exc})") from None
    need = {"label", "kind", "lang_a", "lang_b", "text_a", "text_b"}
    if not need <= set(pairs.columns):
        raise UserError(f"--pairs {path}: expected JSON lines with {', '.join(sorted(need))}")
    pairs["langs"] = ["-".join(sorted((a, b), key=("en", "bn").index if {a, b} <= {"en", "bn"} else str))
                      for a, b in zip(pairs["lang_a"], pairs["lang_b"])]
    return pairs


def cosines(model, pairs: pd.DataFrame, batch_size: int) -> np.ndarray:
    """Cosine of every pair, each distinct text embedded once."""
    texts = sorted(set(pairs["text_a"]) | set(pairs["text_b"]))
    index = {t: i for i, t in enumerate(texts)}
    vecs = emb.encode(model, texts, batch_size)
    a = vecs[[index[t] for t in pairs["text_a"]]]
    b = vecs[[index[t] for t in pairs["text_b"]]]
    return np.clip(np.einsum("ij,ij->i", a, b), -1.0, 1.0)


def sweep(labels: np.ndarray, scores: np.ndarray, vetoed: np.ndarray | None = None) -> pd.DataFrame:
    """tp, fp, fn, precision, recall, f1 per threshold of GRID (a vetoed pair is never predicted)."""
    vetoed = np.zeros(len(labels), bool) if vetoed is None else vetoed
    rows = []
    for t in GRID:
        pred = (scores >= t) & ~vetoed
        tp, fp = int(np.sum(pred & (labels == 1))), int(np.sum(pred & (labels == 0)))
        fn = int(np.sum(~pred & (labels == 1)))
        p = tp / (tp + fp) if tp + fp else 1.0
        r = tp / (tp + fn) if tp + fn else 0.0
        rows.append((float(t), tp, fp, fn, p, r, 2 * p * r / (p + r) if p + r else 0.0))
    return pd.DataFrame(rows, columns=["threshold", "tp", "fp", "fn", "precision", "recall", "f1"])


def choose(sw: pd.DataFrame, target: float = TARGET_PRECISION) -> float | None:
    """The lowest threshold whose precision reaches target and stays there above it; None if none does."""
    ok = sw["precision"].to_numpy() >= target
    stays = np.flip(np.logical_and.accumulate(np.flip(ok)))
    hits = sw["threshold"][stays & (sw["tp"].to_numpy() > 0)]
    return float(hits.iloc[0]) if len(hits) else None


def run(sem: "SemanticConfig", pairs_path: str, output: str, *, model: str | None = None,
        model_version: str | None = None, device: str | None = None, target: float = TARGET_PRECISION) -> Calibration:
    if model:
        sem = dataclasses.replace(sem, model=model, fallback_model=None, revision=None, model_version=model_version)
    elif model_version:
        sem = dataclasses.replace(sem, model_version=model_version)
    if device:
        sem = dataclasses.replace(sem, device=device)
    resolved = emb.resolve(sem, with_thresholds=False)
    pairs = load_pairs(pairs_path)
    pairs["cosine"] = cosines(emb.model_for(resolved.sem), pairs, resolved.sem.batch_size)
    pairs["conflict"] = [numbers_conflict(sorted(number_tokens(a)), sorted(number_tokens(b)), sem.number_guard)
                         for a, b in zip(pairs["text_a"], pairs["text_b"])]
    langs = set(resolved.spec.languages)
    covered = {}
    for lp in sorted(pairs["langs"].unique()):
        a, b = lp.split("-") if "-" in lp else (lp, lp)
        covered[lp] = {a, b} <= langs and (a == b or resolved.spec.cross_language)
    sweeps, unguarded = {}, {}
    groups = {lp: pairs[pairs["langs"] == lp] for lp in covered}
    same = pairs[[covered[lp] and len(set(lp.split("-"))) == 1 for lp in pairs["langs"]]]
    cross = pairs[[covered[lp] and len(set(lp.split("-"))) == 2 for lp in pairs["langs"]]]
    groups.update({"same_language": same, "cross_language": cross})
    for name, g in groups.items():
        if len(g):
            labels, scores = g["label"].to_numpy(), g["cosine"].to_numpy()
            sweeps[name] = sweep(labels, scores, g["conflict"].to_numpy(bool))
            unguarded[name] = sweep(labels, scores)
    chosen = {"same_language": choose(sweeps["same_language"], target) if "same_language" in sweeps else None,
              "cross_language": choose(sweeps["cross_language"], target) if "cross_language" in sweeps else None}
    cal = Calibration(resolved.version, resolved.spec_key, list(resolved.spec.languages),
                      resolved.spec.cross_language, len(pairs), sweeps, unguarded, chosen, covered, scored=pairs)
    write(cal, Path(output))
    return cal


def at(sw: pd.DataFrame, t: float | None) -> pd.Series | None:
    if t is None:
        return None
    return sw.iloc[int(np.argmin(np.abs(sw["threshold"].to_numpy() - t)))]


def snippet(cal: Calibration) -> str:
    thr = {k: v for k, v in cal.chosen.items() if v is not None and (k == "same_language" or cal.cross_language)}
    inner = ", ".join(f"{k}: {v:.2f}" for k, v in thr.items())
    return (f"# newsdedup calibrate ({cal.pairs} labelled pairs, target precision {TARGET_PRECISION})\n"
            f"semantic:\n  models:\n    {cal.spec_key}:\n      calibrated:\n        {cal.version}: {{{inner}}}\n")


def write(cal: Calibration, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"model_version": cal.version, "model": cal.spec_key, "pairs": cal.pairs, "chosen": cal.chosen,
           "covered": cal.covered, "sweeps": {k: v.to_dict("records") for k, v in cal.sweeps.items()},
           "unguarded": {k: v.to_dict("records") for k, v in cal.unguarded.items()}}
    (out / "calibration.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    if all(v is not None for k, v in cal.chosen.items() if k == "same_language"):
        (out / "calibration.yaml").write_text(snippet(cal), encoding="utf-8")
        cal.files["yaml"] = str(out / "calibration.yaml")
    cal.files["json"] = str(out / "calibration.json")
    cal.files["png"] = str(plot(cal, out / "calibration.png"))


def plot(cal: Calibration, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in cal.sweeps if n not in ("same_language", "cross_language")]
    fig, axes = plt.subplots(2, len(names), figsize=(4.2 * len(names), 7), squeeze=False)
    for i, name in enumerate(names):
        sw, ax = cal.sweeps[name], axes[0][i]
        ax.plot(sw["threshold"], sw["precision"], label="precision")
        ax.plot(sw["threshold"], sw["recall"], label="recall")
        ax.plot(sw["threshold"], cal.unguarded[name]["precision"], ":", label="precision, no number guard")
        chosen = cal.chosen["cross_language" if len(set(name.split("-"))) == 2 else "same_language"]
        if chosen is not None and cal.covered[name]:
            ax.axvline(chosen, color="k", lw=0.8)
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


def report_text(cal: Calibration) -> str:
    lines = [f"model_version {cal.version} ({cal.spec_key}: languages {', '.join(cal.languages)}; "
             f"cross-language {'yes' if cal.cross_language else 'no'}); {cal.pairs} labelled pairs"]
    for name, sw in cal.sweeps.items():
        note = "" if cal.covered.get(name, True) else "  (not covered: stage 4 never compares these)"
        pos = int(sw["tp"].iloc[0] + sw["fn"].iloc[0])
        lines.append(f"\n{name}: {pos} same-event pairs{note}")
        lines.append("threshold  precision  recall  f1     fp  fn   precision(no number guard)")
        for t in np.round(np.arange(0.50, 1.0, 0.05), 2):
            r, u = at(sw, t), at(cal.unguarded[name], t)
            lines.append(f"{t:9.2f}  {r['precision']:9.3f}  {r['recall']:6.3f}  {r['f1']:.3f}  {int(r['fp']):3d} "
                         f"{int(r['fn']):3d}   {u['precision']:.3f}")
    for k, v in cal.chosen.items():
        if k == "cross_language" and not cal.cross_language:
            continue
        lines.append(f"\nchosen {k}: " + ("none reaches the target precision" if v is None else f"{v:.2f}"))
    lines.append("\nwrote " + ", ".join(cal.files.values()))
    return "\n".join(lines)
