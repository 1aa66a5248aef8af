"""Concurrent `check --insert` clients against one Postgres: the workload, the clients, the audit, the bench.

The workload comes in rounds. Each round holds a few stories, each sent as several articles:
- fresh stories (new text): the base article, a copy of its text at another URL (stage 2), a
  copy at the same URL under another id (stage 1), two edits with a few words appended (stage 3);
- copies of the loaded sample's stories: the same three kinds, pointing into stored clusters.
Every article of a round goes to `fanout` different clients, and a story's articles to different
clients, so that the same id, and copies of one story at different ids, arrive at once. All clients
start a round together (a barrier); each sends its share as one `check_many` call.

Clients are processes forked from a parent that built and warmed the Checkers (numba, models), each
with its own connection. Every client writes what it sent and every verdict it got to a JSON file.

`audit` then reads Postgres: each story's articles are one cluster (one component of the links, with
the sample's own links), a fresh story has exactly one article without a link, no article is linked
twice, no link points at a missing document, and every inserted article's link is the verdict its
client got. `sequential` runs the same articles through one client, round by round, for comparison.

The bench (`python -m newsdedup_lab.check_concurrent_bench`) stores the bundled sample (one client,
or a job run with --job-load) and runs 16 clients for a few minutes, reporting lookups/s (total and per client), call latency
p50/p99, retries and deadlocks caught, and the audit.
"""

from __future__ import annotations

import json
import os
import random
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

if TYPE_CHECKING:
    from newsdedup.ops.check import Checker

FRESH_ID_BASE = 5_000_000
ROUND_IDS = 1000                   # ids per round: round r uses FRESH_ID_BASE + r * ROUND_IDS + j
STAMP = "2026-05-01T{:02d}:{:02d}:00+00:00"

_WORDS = ("river ferry council budget harbour school market rail bridge minister election court farmer "
          "festival cyclone garment export import teacher doctor hospital police station village city "
          "district union board ward flood drought harvest paddy jute tea fish port road highway bus "
          "truck launch terminal airport flight cargo power plant solar grid gas field price wage "
          "worker factory strike rally protest vote ballot count result seat party leader mayor office "
          "budget loan bank rate bond share index trade stock fund tax levy duty customs border guard "
          "army navy coast storm tide surge shelter relief aid camp refugee water sanitation health "
          "vaccine clinic patient nurse exam student campus library museum theatre cinema cricket "
          "football match goal wicket series captain coach league title trophy stadium ticket fan "
          "monsoon rain heat wave winter fog smog traffic jam metro line station platform signal "
          "garden park lake canal dam embankment erosion island char delta forest tiger deer bird").split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


@dataclass
class Story:
    key: str                         # "fresh:<round>:<n>" or "sample:<base id>"
    ids: list[int]
    base: int | None = None          # the stored sample article the copies belong with


@dataclass
class Round:
    index: int
    articles: list[dict[str, Any]]
    stories: list[Story]
    assignment: list[list[int]]      # per client: indices into articles, in the order sent


def fresh_story(rng: random.Random, r: int, n: int, next_id) -> tuple[Story, list[dict]]:
    body, title = _text(rng, 90), _text(rng, 7).capitalize()
    url = f"https://fresh{r}-{n}.example/news/{rng.randrange(10 ** 9)}"
    stamp = STAMP.format(r % 24, n % 60)
    base = {"url": url, "title": title, "body": body, "published_at": stamp, "source": f"fresh{r}-{n}", "lang": "en"}
    arts = [
        {**base, "id": next_id()},                                                # the base
        {**base, "id": next_id(), "url": url.replace("fresh", "copy", 1)},        # same text elsewhere: stage 2
        {**base, "id": next_id()},                                                # same URL, another id: stage 1
        {**base, "id": next_id(), "url": url + "-e1", "body": body + " " + _text(rng, 3)},   # edits: stage 3
        {**base, "id": next_id(), "url": url + "-e2", "body": body + " " + _text(rng, 3)},
    ]
    return Story(f"fresh:{r}:{n}", [a["id"] for a in arts]), arts


def sample_story(rng: random.Random, r: int, base: dict, next_id) -> tuple[Story, list[dict]]:
    stamp = STAMP.format(r % 24, 59)
    a = {k: base.get(k) for k in ("url", "title", "body", "source", "lang")}
    a["published_at"] = stamp
    arts = [
        {**a, "id": next_id(), "url": f"https://mirror{r}.example/s/{base['id']}-{rng.randrange(10 ** 9)}"},
        {**a, "id": next_id()},
        {**a, "id": next_id(), "url": f"https://mirror{r}.example/e/{base['id']}-{rng.randrange(10 ** 9)}",
         "body": (a["body"] or "") + " " + _text(rng, 3)},
    ]
    return Story(f"sample:{base['id']}", [x["id"] for x in arts], base=int(base["id"])), arts


def make_round(r: int, sample_bases: Sequence[dict], clients: int, fresh: int = 3, from_sample: int = 2,
               fanout: int = 3, seed: int = 0) -> Round:
    """Round r: `fresh` new stories and `from_sample` copies of sample stories, each article sent by
    `fanout` clients; a story's articles go to as many different clients as there are."""
    rng = random.Random(seed * 1_000_003 + r)
    counter = iter(range(FRESH_ID_BASE + r * ROUND_IDS, FRESH_ID_BASE + (r + 1) * ROUND_IDS))
    next_id = lambda: next(counter)  # noqa: E731
    stories, articles = [], []
    for n in range(fresh):
        story, arts = fresh_story(rng, r, n, next_id)
        stories.append(story)
        articles += arts
    for base in rng.sample(list(sample_bases), min(from_sample, len(sample_bases))):
        story, arts = sample_story(rng, r, base, next_id)
        stories.append(story)
        articles += arts
    assignment: list[list[int]] = [[] for _ in range(clients)]
    index = {a["id"]: i for i, a in enumerate(articles)}
    for story in stories:
        for copy in range(fanout):
            # Each story's articles on distinct clients (as far as there are), a different set per copy.
            chosen = rng.sample(range(clients), min(clients, len(story.ids)))
            for k, doc_id in enumerate(story.ids):      # fewer clients than articles: some get several
                who = chosen[k % len(chosen)]
                if index[doc_id] not in assignment[who]:
                    assignment[who].append(index[doc_id])
    for share in assignment:
        rng.shuffle(share)
    return Round(r, articles, stories, assignment)


# ---------------------------------------------------------------- the clients

def _client(i: int, checker: "Checker", round_of: Callable[[int], Round], barrier, go, out: Path) -> None:
    """One client process: each round, wait for the others, send this client's share, record. The
    Checker is the parent's, copied by the fork: its run_id and stats are this process's own."""
    record: dict[str, Any] = {"client": i, "calls": [], "error": None}
    checker.run_id = f"concurrent-{i}"
    try:
        r = 0
        while True:
            rnd = round_of(r)       # built before the barrier: the round starts with the sends
            r += 1
            barrier.wait(timeout=300)
            if not go.value:
                break
            share = [rnd.articles[k] for k in rnd.assignment[i]]
            if not share:
                continue
            t = time.perf_counter()
            verdicts = checker.check_many(share)
            ms = (time.perf_counter() - t) * 1000
            record["calls"].append({"round": rnd.index, "sent": [a["id"] for a in share], "ms": round(ms, 2),
                                    "verdicts": [json.loads(v.json()) for v in verdicts]})
    except BaseException:     # noqa: BLE001 - everything a client meets is reported, none of it hidden
        record["error"] = traceback.format_exc()
        try:
            barrier.abort()
        except Exception:  # noqa: BLE001
            pass
    finally:
        record["stats"] = checker.stats.as_dict()
        checker.close()
        (out / f"client-{i}.json").write_text(json.dumps(record), encoding="utf-8")


@dataclass
class RunResult:
    seconds: float
    rounds: int
    clients: list[dict]
    exitcodes: list[int | None]

    @property
    def errors(self) -> list[str]:
        return [c["error"] for c in self.clients if c.get("error")] + \
            [f"client {i} exited {code}" for i, code in enumerate(self.exitcodes) if code != 0]


def run_clients(checkers: Sequence["Checker"], clients: int, round_of: Callable[[int], Round], seconds: float,
                out: Path, join_timeout: float = 600) -> RunResult:
    """`clients` client processes, client i forked with checkers[i % len(checkers)] (each process has
    its own copy and opens its own connection), run rounds 0, 1, ... in step until `seconds` have passed."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    for c in checkers:
        c.close()        # no connection crosses the fork
    out.mkdir(parents=True, exist_ok=True)
    go = ctx.Value("b", 1)
    deadline = ctx.Value("d", 0.0)
    started = ctx.Value("i", 0)

    def decide():         # one process runs it per round, before any is let through: all see the same answer
        go.value = 1 if time.time() < deadline.value else 0
        if go.value:
            started.value += 1

    barrier = ctx.Barrier(clients, action=decide)
    procs = [ctx.Process(target=_client, args=(i, checkers[i % len(checkers)], round_of, barrier, go, out), daemon=True)
             for i in range(clients)]
    deadline.value = time.time() + seconds
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join(join_timeout)
    elapsed = time.perf_counter() - t0
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    records = []
    for i in range(clients):
        path = out / f"client-{i}.json"
        records.append(json.loads(path.read_text(encoding="utf-8")) if path.exists()
                       else {"client": i, "calls": [], "error": "no record written"})
    return RunResult(elapsed, started.value, records, [p.exitcode for p in procs])


def sequential(checker: "Checker", rounds: Iterable[Round]) -> list:
    """The same rounds' articles through one client, each round as one call (its distinct articles)."""
    return [v for rnd in rounds for v in checker.check_many(rnd.articles)]


# ---------------------------------------------------------------- the audit

def _components(pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in list(parent)}


def audit(dsn: str, rounds: Sequence[Round]) -> dict[str, Any]:
    """What Postgres holds for the rounds' articles, and every way it falls short of one client's result."""
    import psycopg

    ids = sorted({a["id"] for r in rounds for a in r.articles})
    with psycopg.connect(dsn) as conn:
        stored = {r[0] for r in conn.execute("SELECT id FROM documents WHERE id = ANY(%s)", (ids,))}
        links = conn.execute("SELECT duplicate_id, canonical_id, stage FROM duplicate_links "
                             "WHERE reverted_at IS NULL AND superseded_at IS NULL").fetchall()
        dangling = conn.execute(
            "SELECT count(*) FROM duplicate_links l WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = l.duplicate_id) "
            "OR NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = l.canonical_id)").fetchone()[0]
        twice = conn.execute("SELECT count(*) FROM (SELECT duplicate_id FROM duplicate_links "
                             "WHERE reverted_at IS NULL AND superseded_at IS NULL GROUP BY 1 HAVING count(*) > 1) x"
                             ).fetchone()[0]
    link_of = {d: (c, s) for d, c, s in links}
    comp = _components((d, c) for d, c, _ in links)
    root = lambda x: comp.get(x, x)  # noqa: E731
    problems: list[str] = []
    missing = [i for i in ids if i not in stored]
    if missing:
        problems.append(f"{len(missing)} articles not stored: {missing[:10]}")
    if dangling:
        problems.append(f"{dangling} links to or from a missing document")
    if twice:
        problems.append(f"{twice} documents linked twice")
    story_root: dict[str, int] = {}
    split = merged = 0
    for r in rounds:
        for s in r.stories:
            roots = {root(i) for i in s.ids} | ({root(s.base)} if s.base is not None else set())
            if len(roots) != 1:
                split += 1
                problems.append(f"story {s.key} (round {r.index}) split into {len(roots)} clusters: "
                                + "; ".join(f"{i}->{link_of.get(i)}" for i in s.ids))
                continue
            if s.base is None:
                unlinked = [i for i in s.ids if i not in link_of]
                if len(unlinked) != 1:
                    problems.append(f"story {s.key}: {len(unlinked)} articles without a link: {unlinked}")
                story_root[s.key] = roots.pop()
            else:
                story_root[f"{s.key}@{r.index}"] = roots.pop()
    fresh_roots = [v for k, v in story_root.items() if k.startswith("fresh:")]
    if len(set(fresh_roots)) != len(fresh_roots):
        merged = len(fresh_roots) - len(set(fresh_roots))
        problems.append(f"{merged} fresh stories merged into another's cluster")
    # Components are named by their smallest id (union by min): a sample id for a sample story, the
    # story's first id for a fresh one, whichever article became its canonical. Comparable across runs.
    return {"articles": len(ids), "stored": len(stored & set(ids)), "links": len(links), "split_stories": split,
            "merged_stories": merged, "problems": problems,
            "links_of": {i: link_of.get(i) for i in ids}, "cluster_of": {i: root(i) for i in ids}}


def verdict_problems(result: RunResult, rounds: Sequence[Round], dsn: str) -> list[str]:
    """Every client answered every article it sent, in order; each inserted article's stored link is
    the verdict its client got; anything not inserted is only an article another client stored."""
    import psycopg

    by_round = {r.index: r for r in rounds}
    problems = []
    with psycopg.connect(dsn) as conn:
        link_of = {d: (c, s) for d, c, s in conn.execute(
            "SELECT duplicate_id, canonical_id, stage FROM duplicate_links WHERE reverted_at IS NULL "
            "AND superseded_at IS NULL AND duplicate_id >= %s", (FRESH_ID_BASE,))}
        stored = {r[0] for r in conn.execute("SELECT id FROM documents WHERE id >= %s", (FRESH_ID_BASE,))}
    for c in result.clients:
        for call in c["calls"]:
            got = [v["id"] for v in call["verdicts"]]
            if got != call["sent"]:
                problems.append(f"client {c['client']} round {call['round']}: sent {call['sent']}, answered {got}")
            for v in call["verdicts"]:
                err = v.get("error")
                if err is None:
                    want = (v["canonical_id"], v["stage"]) if v["canonical_id"] is not None else None
                    if link_of.get(v["id"]) != want:
                        problems.append(f"client {c['client']}: article {v['id']} answered {want}, "
                                        f"stored {link_of.get(v['id'])}")
                elif "already stored" not in err or v["id"] not in stored:   # (a url_hash taken by another id)
                    problems.append(f"client {c['client']}: article {v['id']}: {err}")
    sent_rounds = {call["round"] for c in result.clients for call in c["calls"]}
    assert sent_rounds <= set(by_round)
    return problems


def latency_summary(result: RunResult) -> dict[str, Any]:
    from .check_bench import percentile

    calls = [call for c in result.clients for call in c["calls"]]
    ms = [call["ms"] for call in calls]
    per_article = [call["ms"] / len(call["sent"]) for call in calls]
    articles = sum(len(call["sent"]) for call in calls)
    per_client = [sum(len(call["sent"]) for call in c["calls"]) / result.seconds for c in result.clients]
    stats = [c.get("stats", {}) for c in result.clients]
    total = {k: sum(s.get(k, 0) for s in stats) for k in ("batches", "retries", "deadlocks",
                                                           "serialization_failures", "gave_up", "claim_s")}
    total["claim_s"] = round(total["claim_s"], 1)
    return {
        "clients": len(result.clients), "rounds": result.rounds, "seconds": round(result.seconds, 1),
        "calls": len(calls), "articles_sent": articles,
        "lookups_per_s": round(articles / result.seconds, 1),
        "per_client_lookups_per_s": {"min": round(min(per_client), 1), "max": round(max(per_client), 1),
                                     "mean": round(sum(per_client) / len(per_client), 1)},
        "articles_per_call_mean": round(articles / max(1, len(calls)), 1),
        "call_ms": {"p50": round(percentile(ms, 50), 1), "p99": round(percentile(ms, 99), 1),
                    "max": round(max(ms), 1)} if ms else {},
        "per_article_ms": {"p50": round(percentile(per_article, 50), 1),
                           "p99": round(percentile(per_article, 99), 1)} if ms else {},
        "checker_stats": total,
    }


# ---------------------------------------------------------------- setup shared by the test and the bench

def sample_bases(dsn: str, sample_jsonl: Path) -> list[dict]:
    """The sample articles that the load left as canonicals (no active link), with a body."""
    import psycopg

    rows = {r["id"]: r for r in map(json.loads, sample_jsonl.read_text(encoding="utf-8").splitlines())}
    with psycopg.connect(dsn) as conn:
        linked = {r[0] for r in conn.execute("SELECT duplicate_id FROM duplicate_links WHERE reverted_at IS NULL "
                                             "AND superseded_at IS NULL")}
    return [r for i, r in sorted(rows.items()) if i not in linked and len((r.get("body") or "").split()) >= 40]


def checkers(conf, dsn: str, batch_sizes: Sequence[int] = (256, 2)) -> list["Checker"]:
    """One inserting Checker per batch size (clients take them in turn; the small one makes a call
    span several transactions), warmed on one lookup without insert so that forked clients start
    compiled. Each client process gets its own copy by the fork."""
    from newsdedup.ops.check import Checker

    with Checker(conf, dsn) as warm:
        warm.check({"id": 1, "url": "https://warm.example/a", "title": "warm up", "published_at": STAMP.format(0, 0),
                    "body": _text(random.Random(1), 60), "lang": "en"})
    return [Checker(conf, dsn, insert=True, batch_size=b) for b in batch_sizes]


def load_sample(spark, conf, sample: Path, out: Path, dsn: str) -> dict:
    """The sample run by the job and loaded into Postgres (documents and the batch's links)."""
    from newsdedup import job

    return job.run(spark, str(sample), str(out), conf, dsn=dsn)


def store_sample(conf, sample_jsonl: Path, dsn: str) -> list:
    """The sample stored by one `check --insert` client, without Spark: what the test uses, where a job
    run (1-5 min on 2 shared cores) would cost more than the whole concurrent run. The rows carry the
    same columns a load writes; the links are the live lookups' (docs/operations.md, "Live lookups")."""
    from newsdedup.io import pg, pg_documents
    from newsdedup.ops.check import Checker, read_jsonl

    pg_documents.ensure_schema(dsn)
    with pg.connect(dsn) as conn:
        pg_documents.ensure_link_constraints(conn)     # as a load leaves it: foreign keys, one active link
    with Checker(conf, dsn, insert=True, run_id="sample") as one:
        return one.check_many(read_jsonl(str(sample_jsonl)))


# ---------------------------------------------------------------- the bench

def markdown(result: dict, command: str) -> str:
    s = result["summary"]
    st = s["checker_stats"]
    a = result["audit"]
    return "\n".join([
        f"## Concurrent writers: {s['clients']} `check --insert` clients with overlapping articles",
        "",
        f"Generated by `{command}` ({result['machine']}; embedded PostgreSQL 18, default settings; "
        f"`uptime` before: `{result['uptime_before']}`, after: `{result['uptime_after']}`).",
        "",
        f"The bundled sample stored by {result['loaded_by']} ({result['sample_documents']} documents), then "
        f"{s['clients']} client processes "
        f"(`newsdedup_lab.check_concurrent_bench`): {s['rounds']} rounds in {s['seconds']} s, all clients starting "
        "each round together. A round is 3 fresh stories (base, same text at another URL, same URL under "
        "another id, two edits) and copies of 2 sample stories, every article sent by 3 clients, each story's "
        f"articles to different clients; each client sends its share as one call ({s['articles_per_call_mean']} "
        "articles on average; half the clients use batch_size 2, so their calls span several transactions).",
        "",
        "| clients | articles answered | lookups/s (all clients) | per client min / mean / max | "
        "call p50 ms | call p99 ms | per article p50 / p99 ms | retries | deadlocks caught | serialization failures | gave up |",
        "|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|",
        f"| {s['clients']} | {s['articles_sent']:,} | {s['lookups_per_s']} | "
        f"{s['per_client_lookups_per_s']['min']} / {s['per_client_lookups_per_s']['mean']} / "
        f"{s['per_client_lookups_per_s']['max']} | {s['call_ms'].get('p50')} | {s['call_ms'].get('p99')} | "
        f"{s['per_article_ms'].get('p50')} / {s['per_article_ms'].get('p99')} | {st['retries']} | {st['deadlocks']} | "
        f"{st['serialization_failures']} | {st['gave_up']} |",
        "",
        f"Time spent in the claims statement (waiting for writers of shared keys included), all clients: "
        f"{st['claim_s']} s of {round(s['seconds'] * s['clients'], 1)} client-seconds.",
        "",
        f"Audit afterwards: {a['articles']:,} distinct articles, {a['stored']:,} stored; stories split "
        f"{a['split_stories']}, merged {a['merged_stories']}; verdict mismatches {result['verdict_problems']}; "
        f"client errors {result['client_errors']}; problems: {a['problems'][:5] or 'none'}.",
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    import argparse
    import platform
    import subprocess
    import sys
    import tempfile

    from newsdedup.config import load_config
    from newsdedup.io import pg_embedded
    from newsdedup.io.spark import get_spark

    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.check_concurrent_bench")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=180)
    p.add_argument("--pgdata", default=None, help="embedded server directory (default: a fresh temporary one)")
    p.add_argument("--out", default="docs/benchmarks_check.md",
                   help="the Markdown file whose concurrent section is replaced (appended when absent)")
    p.add_argument("--job-load", action="store_true",
                   help="load the sample with a job run (Spark) instead of one check --insert client")
    args = p.parse_args(argv)
    command = "python -m newsdedup_lab.check_concurrent_bench " + " ".join(sys.argv[1:] if argv is None else argv)
    repo = Path(__file__).resolve().parents[2]
    sample = repo / "samples" / "articles.parquet"
    work = Path(tempfile.mkdtemp(prefix="check-concurrent-"))
    pgdata = Path(args.pgdata) if args.pgdata else work / "pgdata"
    dsn = pg_embedded.start(pgdata)
    conf = load_config(overrides={"semantic": {"enabled": False}, "spark": {"shuffle_partitions": 2}})
    try:
        if args.job_load:
            spark = get_spark(conf, "newsdedup-check-concurrent")
            load_sample(spark, conf, sample, work / "out", dsn)
            spark.stop()
            loaded_by = "a job run (Spark) and its load"
        else:
            store_sample(conf, sample.with_suffix(".jsonl"), dsn)
            loaded_by = "one `check --insert` client"
        bases = sample_bases(dsn, sample.with_suffix(".jsonl"))
        round_of = lambda r: make_round(r, bases, args.clients)  # noqa: E731
        clients = checkers(conf, dsn)
        import psycopg

        with psycopg.connect(dsn) as conn:
            docs = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        result = run_clients(clients, args.clients, round_of, args.seconds, work / "clients")
        uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        ran = [round_of(r) for r in range(result.rounds)]
        summary = latency_summary(result)
        checked = audit(dsn, ran)
        out = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "loaded_by": loaded_by,
               "uptime_before": uptime_before,
               "uptime_after": uptime_after, "sample_documents": docs, "summary": summary,
               "audit": {k: v for k, v in checked.items() if k not in ("links_of", "cluster_of")},
               "verdict_problems": len(verdict_problems(result, ran, dsn)), "client_errors": len(result.errors)}
    finally:
        pg_embedded.stop(pgdata)
    print(json.dumps(out, indent=2))
    section = markdown(out, command.strip())
    path = Path(args.out)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    marker = "## Concurrent writers"
    if marker in text:
        head, _, rest = text.partition(marker)
        nxt = rest.find("\n## ")
        text = head + section + (rest[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
