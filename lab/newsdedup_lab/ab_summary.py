"""Summarise lab/scripts/ab_fresh.sh: one row per run (wall, each step, the rest), then medians.

    python -m newsdedup_lab.ab_summary WORK

"outside the steps" is the wall time no step reports: the interpreter and JVM starting, reading the
input's schema, the run's markers and record, and the gaps between steps."""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

STEPS = ("check_input", "prepare", "closure", "url", "content", "simhash", "components", "write_delta", "optimize_delta")


def runs(work: Path) -> list[dict]:
    out = []
    for line in (work / "ab.txt").read_text().splitlines():
        m = re.search(r"round (\d+) (\w+) rc=(\d+) wall ([\d.]+) load ([\d.]+) -> ([\d.]+)", line)
        if not m:
            continue
        steps = {}
        for log_line in (work / f"{m[2]}_{m[1]}.log").read_text().splitlines():
            s = re.search(r"\] ([a-z_]+): done in ([\d.]+)s", log_line)
            if s:
                steps[s[1]] = float(s[2])
        out.append({"round": int(m[1]), "side": m[2], "rc": int(m[3]), "wall": float(m[4]), "steps": steps,
                    "load": f"{m[5]} -> {m[6]}"})
    return out


def table(rows: list[dict]) -> str:
    head = "| side | round | wall s | " + " | ".join(STEPS) + " | outside the steps s | load before -> after |"
    lines = [head, "|---|---:|---:|" + "---:|" * len(STEPS) + "---:|---|"]
    for side in ("base", "main"):
        for r in (r for r in rows if r["side"] == side):
            cells = " | ".join(f"{r['steps'].get(n, float('nan')):.1f}" for n in STEPS)
            lines.append(f"| {side} | {r['round']} | {r['wall']:.1f} | {cells} | "
                         f"{r['wall'] - sum(r['steps'].values()):.1f} | {r['load']} |")
    for side in ("base", "main"):
        picked = [r for r in rows if r["side"] == side]
        if picked:
            med = {n: statistics.median(r["steps"].get(n, 0.0) for r in picked) for n in STEPS}
            rest = statistics.median(r["wall"] - sum(r["steps"].values()) for r in picked)
            lines.append(f"| {side} | median | {statistics.median(r['wall'] for r in picked):.1f} | "
                         + " | ".join(f"{med[n]:.1f}" for n in STEPS) + f" | {rest:.1f} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    rows = runs(Path(args[0]))
    if any(r["rc"] for r in rows):
        print("some runs failed: " + ", ".join(f"{r['side']} {r['round']}" for r in rows if r["rc"]))
    print(table(rows))
    by_round = {}
    for r in rows:
        by_round.setdefault(r["round"], {})[r["side"]] = r["wall"]
    ratios = [v["main"] / v["base"] for v in by_round.values() if {"main", "base"} <= set(v)]
    if ratios:
        print(f"\nmain / base per round: {', '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
