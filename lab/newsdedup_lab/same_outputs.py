"""Are two newsdedup outputs the same? Every documents row and every link, compared without Spark.

For refactors that must not change behaviour: run the job before and after on
the same input into two outputs, then

    python -m newsdedup_lab.same_outputs OUT_BEFORE OUT_AFTER

Documents are compared on every column but run_id (each run has its own);
links on duplicate_id, canonical_id, stage, score, via_id and whether the link
is active (not reverted, not superseded); linked_at and run_id differ by
construction. Exit status 0 when both tables are identical, 1 otherwise, with
the first differing rows printed.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd
from deltalake import DeltaTable

LINK_COLUMNS = ("duplicate_id", "canonical_id", "stage", "score", "via_id", "active")


def documents(output: str) -> pd.DataFrame:
    docs = DeltaTable(f"{output}/documents").to_pandas()
    docs = docs.drop(columns=[c for c in ("run_id",) if c in docs.columns])
    return _as_text(docs.sort_values("id").reset_index(drop=True))


def links(output: str) -> pd.DataFrame:
    t = DeltaTable(f"{output}/duplicate_links").to_pandas()
    active = t["reverted_at"].isna()
    if "superseded_at" in t.columns:
        active &= t["superseded_at"].isna()
    t["active"] = active
    t = t[[c for c in LINK_COLUMNS if c in t.columns]]
    return _as_text(t.sort_values(["duplicate_id", "canonical_id", "stage"]).reset_index(drop=True))


def _as_text(df: pd.DataFrame) -> pd.DataFrame:
    """Every cell as its repr: arrays, nulls and floats compare exactly (a score differing in the
    last bit differs)."""
    return df.apply(lambda col: col.map(lambda v: repr(v.tolist()) if hasattr(v, "tolist") else repr(v)))


def differences(a: pd.DataFrame, b: pd.DataFrame, limit: int = 10) -> list[str]:
    """Empty when a and b hold the same rows; else lines describing the first differences."""
    if list(a.columns) != list(b.columns):
        return [f"columns differ: {list(a.columns)} vs {list(b.columns)}"]
    if a.equals(b):
        return []
    both = a.merge(b, how="outer", indicator=True)
    odd = both[both["_merge"] != "both"].head(limit)
    side = {"left_only": "only in the first", "right_only": "only in the second"}
    return [f"{len(a)} vs {len(b)} rows"] + [f"{side[r['_merge']]}: {r.drop('_merge').to_dict()}"
                                             for _, r in odd.iterrows()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.same_outputs", description=__doc__.split("\n")[0])
    p.add_argument("first")
    p.add_argument("second")
    args = p.parse_args(argv)
    same = True
    for name, read in (("documents", documents), ("duplicate_links", links)):
        a, b = read(args.first), read(args.second)
        diff = differences(a, b)
        print(f"{name}: {len(a)} and {len(b)} rows, {'identical' if not diff else 'DIFFERENT'}")
        for line in diff:
            print(f"  {line}")
        same &= not diff
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
