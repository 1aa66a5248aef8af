"""A labelled synthetic news corpus (English and Bangla) for evaluation and benchmarks.

Every document belongs to a ground-truth cluster (one news item) and carries
the kind of variant that produced it:

  origin           the first publication of an item
  url_variant      same page, URL with tracking parameters, fragment, www,
                   trailing slash, scheme or parameter order changed (stage 1)
  syndicated       byte-identical title and body under another outlet's URL (stage 2)
  nfd              Bangla copy in another Unicode normal form, other URL (stage 2)
  typo             a few characters fixed or broken (stage 3)
  appended_update  one or two sentences added at the end (stage 3)
  headline_change  same body under a new headline (stage 3)
  rewrite          the same event written up again with the same facts (stage 4 territory)
  hard_negative    a *different* item built from the same template as another
                   one: other teams, scores, names, places (must stay apart)

Article text is assembled from phrase pools with word slots, so that two
unrelated articles share only short fixed fragments, and an article is fully
determined by (plan seed, entities): a hard negative reuses the plan with new
entities, a rewrite reuses the entities with a new plan. Generation is
streamed in chunks to Parquet, so a million documents need little memory.
"""

from __future__ import annotations

import random
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from newsdedup.stages import content as tx

if TYPE_CHECKING:
    from newsdedup.config import Config

KINDS = ("origin", "url_variant", "syndicated", "nfd", "typo", "appended_update",
         "headline_change", "rewrite", "hard_negative")

INPUT_SCHEMA = pa.schema([("id", pa.int64()), ("url", pa.string()), ("title", pa.string()),
                          ("body", pa.string()), ("published_at", pa.timestamp("us", tz="UTC")),
                          ("source", pa.string()), ("lang", pa.string())])
TRUTH_SCHEMA = pa.schema([("id", pa.int64()), ("cluster_id", pa.int64()), ("kind", pa.string()),
                          ("lang", pa.string()), ("template_id", pa.int64()), ("parent_id", pa.int64())])

T0 = datetime(2023, 1, 1, tzinfo=timezone.utc)

# Expected number of copies of each kind per item (drawn independently).
DEFAULT_RATES: dict[str, float] = {
    "url_variant": 0.20, "syndicated": 0.10, "nfd": 0.30, "typo": 0.08, "appended_update": 0.08,
    "headline_change": 0.06, "rewrite": 0.05, "hard_negative": 0.10,
}

from .synth_text import entities, render, update_sentences


# --------------------------------------------------------------------------- sources and URLs

@dataclass(frozen=True)
class Source:
    name: str
    lang: str
    pattern: str        # {section} {slug} {num}
    id_param: str | None = None   # article id carried in this query parameter (allowlisted)


SOURCES = (
    Source("dailystar", "en", "https://www.thedailystar.net/{section}/news/{slug}-{num}"),
    Source("bdnews24", "en", "https://bdnews24.com/{section}/article.php?id={num}", "id"),
    Source("prothomalo", "bn", "https://www.prothomalo.com/{section}/{slug}{num}"),
    Source("kalerkantho", "bn", "https://www.kalerkantho.com/online/{section}/article.php?news_id={num}", "news_id"),
)
WIRES = {"en": Source("wire", "en", "https://wire.example.com/story/{num}"),
         "bn": Source("bnwire", "bn", "https://bn.wire.example.org/news/{section}/{num}")}
SECTIONS = ("national", "business", "politics", "country", "world")  # sports items go to "sports"


def make_url(src: Source, section: str, num: int, slug: str) -> str:
    return src.pattern.format(section=section, slug=slug, num=num)


def _slug(title: str, lang: str) -> str:
    if lang != "en":
        return "news-"
    words = re.findall(r"[a-z0-9]+", title.lower())[:6]
    return "-".join(words) or "story"


def url_variant(url: str, rng: random.Random) -> str:
    """The same page under another spelling of its URL; normalises to the same key."""
    base, _, frag = url.partition("#")
    path, _, query = base.partition("?")
    params = [p for p in query.split("&") if p]
    tracking = rng.choice([["utm_source=facebook", "utm_medium=social"], ["fbclid=IwAR" + str(rng.randint(10**6, 10**7))],
                           ["gclid=" + str(rng.randint(10**5, 10**6))], ["utm_campaign=newsletter"], []])
    params = params + tracking
    if len(params) > 1 and rng.random() < 0.5:
        params = params[::-1]          # article id after the tracking parameters
    if rng.random() < 0.5:
        path = path.replace("://www.", "://", 1) if "://www." in path else path.replace("://", "://www.", 1)
    if not query and rng.random() < 0.5:
        path = path + "/"
    if rng.random() < 0.3:
        path = path.replace("https://", "http://", 1)
    out = path + ("?" + "&".join(params) if params else "")
    if rng.random() < 0.5 or out == url:
        out += rng.choice(["#comments", "#top", "#section-2"])
    return out


# --------------------------------------------------------------------------- text edits

def typo(text: str, rng: random.Random, n_edits: int = 2) -> str:
    """Swap two adjacent letters inside a few words (or undo such a slip)."""
    words = text.split(" ")
    candidates = [i for i, w in enumerate(words) if len(w) >= 4]
    rng.shuffle(candidates)
    done = 0
    for i in candidates:
        w = words[i]
        spots = [j for j in range(1, len(w) - 2) if w[j] != w[j + 1]]   # swapping "mm" changes nothing
        if not spots:
            continue
        j = rng.choice(spots)
        words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
        done += 1
        if done == n_edits:
            break
    return " ".join(words)


def cms_spelling(text: str) -> str:
    """Bangla as many CMSes store it: precomposed YYA (U+09DF), which NFC/NFKC decompose."""
    return text.replace("\u09af\u09bc", "\u09df")


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


# --------------------------------------------------------------------------- generator

@dataclass
class Doc:
    id: int
    url: str
    title: str
    body: str
    published_at: datetime
    source: str
    lang: str            # the true language (truth); the input column may hide it
    lang_given: bool
    cluster_id: int
    kind: str
    template_id: int
    parent_id: int


class Generator:
    """Streams documents item by item; everything follows from the seed."""

    def __init__(self, seed: int = 7, rates: Mapping[str, float] | None = None, bn_share: float = 0.45,
                 sports_share: float = 0.3, id_base: int = 0):
        self.rng = random.Random(seed)
        self.rates = dict(DEFAULT_RATES if rates is None else rates)
        self.bn_share = bn_share
        self.sports_share = sports_share
        # Ids, cluster ids and URL article numbers start at id_base, so that independently
        # generated blocks never collide (a block holds fewer than BLOCK documents).
        self.next_id = id_base + 1
        self.next_cluster = id_base + 1
        self.next_num = 100_000 + 10 * id_base

    def _num(self) -> int:
        self.next_num += self.rng.randint(1, 9)
        return self.next_num

    def _count(self, kind: str) -> int:
        """How many copies of a kind an item gets: floor(rate) plus one with the remainder's probability."""
        rate = self.rates.get(kind, 0.0)
        whole = int(rate)
        return whole + (1 if self.rng.random() < rate - whole else 0)

    def _doc(self, url, title, body, when, source, lang, cluster, kind, template, parent, lang_col=True) -> Doc:
        d = Doc(self.next_id, url, title, body, when, source, lang, lang_col, cluster, kind, template, parent)
        self.next_id += 1
        return d

    def _article(self, lang: str, sports: bool, plan: int, ent: Mapping[str, str],
                 cms: bool) -> tuple[str, str]:
        title, body = render(plan, ent, lang, sports)
        if lang == "bn" and cms:
            title, body = cms_spelling(title), cms_spelling(body)
        return title, body

    def item(self) -> list[Doc]:
        """One news item with its variants, and possibly a hard negative built from its template."""
        rng = self.rng
        lang = "bn" if rng.random() < self.bn_share else "en"
        sports = rng.random() < self.sports_share
        src = rng.choice([s for s in SOURCES if s.lang == lang])
        section = "sports" if sports else rng.choice(SECTIONS)
        plan = rng.getrandbits(48)
        ent = entities(rng, lang)
        cms = rng.random() < 0.5           # half the Bangla items use the precomposed spelling
        title, body = self._article(lang, sports, plan, ent, cms)
        when = T0 + timedelta(minutes=rng.randint(0, 3 * 365 * 24 * 60))
        cluster = self.next_cluster
        self.next_cluster += 1
        url = make_url(src, section, self._num(), _slug(title, lang))
        lang_col = rng.random() < 0.7          # some rows arrive without a language
        origin = self._doc(url, title, body, when, src.name, lang, cluster, "origin", plan, 0, lang_col)
        docs = [origin]

        def later() -> datetime:
            return when + timedelta(minutes=rng.randint(5, 72 * 60))

        def add(kind, url, title, body, source):
            docs.append(self._doc(url, title, body, later(), source, lang, cluster, kind, plan, origin.id,
                                  rng.random() < 0.7))

        for _ in range(self._count("url_variant")):
            add("url_variant", url_variant(url, rng), title, body, src.name)
        wire = WIRES[lang]
        for _ in range(self._count("syndicated")):
            add("syndicated", make_url(wire, section, self._num(), ""), title, body, wire.name)
        if lang == "bn":
            for _ in range(self._count("nfd")):
                add("nfd", make_url(wire, section, self._num(), ""), nfd(title), nfd(body), wire.name)
        for _ in range(self._count("typo")):
            add("typo", make_url(src, section, self._num(), _slug(title, lang)), title,
                typo(body, rng, rng.randint(1, 3)), src.name)
        for _ in range(self._count("appended_update")):
            extra = update_sentences(lang, ent, rng, rng.randint(1, 2))
            add("appended_update", make_url(src, section, self._num(), _slug(title, lang)), title,
                body + "\n\n" + extra, src.name)
        for _ in range(self._count("headline_change")):
            new_title = title
            for _attempt in range(10):          # the headline pool is small: insist on a new one
                if tx.normalize_text(new_title) != tx.normalize_text(title):
                    break
                new_title, _ = self._article(lang, sports, rng.getrandbits(48), ent, cms)
            add("headline_change", make_url(src, section, self._num(), _slug(new_title, lang)), new_title, body,
                src.name)
        for _ in range(self._count("rewrite")):
            other = rng.choice([s for s in SOURCES if s.lang == lang])
            r_title, r_body = self._article(lang, sports, rng.getrandbits(48), ent, cms)
            add("rewrite", make_url(other, section, self._num(), _slug(r_title, lang)), r_title, r_body, other.name)

        for _ in range(self._count("hard_negative")):
            # Same template (plan), another game / other people: a distinct item.
            n_ent = entities(rng, lang)
            n_title, n_body = self._article(lang, sports, plan, n_ent, cms)
            n_cluster = self.next_cluster
            self.next_cluster += 1
            docs.append(self._doc(make_url(src, section, self._num(), _slug(n_title, lang)), n_title, n_body,
                                  later(), src.name, lang, n_cluster, "hard_negative", plan, origin.id,
                                  rng.random() < 0.7))
        return docs

    def docs(self, n: int) -> Iterator[Doc]:
        """Exactly n documents (the last item may be cut short)."""
        produced = 0
        while produced < n:
            for d in self.item():
                if produced >= n:
                    return
                yield d
                produced += 1


def _tables(docs: list[Doc]) -> tuple[pa.Table, pa.Table]:
    cols = {f.name: [getattr(d, f.name) for d in docs] for f in INPUT_SCHEMA}
    cols["lang"] = [d.lang if d.lang_given else None for d in docs]
    tcols = {f.name: [getattr(d, f.name) for d in docs] for f in TRUTH_SCHEMA}
    return pa.table(cols, schema=INPUT_SCHEMA), pa.table(tcols, schema=TRUTH_SCHEMA)


BLOCK = 20_000   # documents per independently seeded block (part of what a seed means)
ROW_GROUP = 5_000  # small row groups so that Spark can split even a modest file across cores


def _block(args: tuple[int, int, int, Mapping[str, float] | None]) -> tuple[pa.Table, pa.Table]:
    seed, b, n, rates = args
    gen = Generator(seed * 1_000_003 + b, rates, id_base=b * BLOCK)
    return _tables(list(gen.docs(n)))


def _blocks(n: int, seed: int, rates: Mapping[str, float] | None) -> list[tuple]:
    return [(seed, b, min(BLOCK, n - b * BLOCK), rates) for b in range((n + BLOCK - 1) // BLOCK)]


def generate(n: int, seed: int = 7, rates: Mapping[str, float] | None = None) -> tuple[pa.Table, pa.Table]:
    """(documents, truth) as Arrow tables, in memory: for tests and small evaluations."""
    parts = [_block(a) for a in _blocks(n, seed, rates)]
    return pa.concat_tables([p[0] for p in parts]), pa.concat_tables([p[1] for p in parts])


def write(n: int, out_dir: str | Path, seed: int = 7, workers: int = 1,
          rates: Mapping[str, float] | None = None) -> tuple[Path, Path]:
    """Write <out>/docs.parquet (the job's input schema) and <out>/truth.parquet, a block at a time.

    The corpus depends on (n, seed, rates) only, not on the number of worker processes.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    docs_path, truth_path = out / "docs.parquet", out / "truth.parquet"
    jobs = _blocks(n, seed, rates)
    with pq.ParquetWriter(docs_path, INPUT_SCHEMA) as dw, pq.ParquetWriter(truth_path, TRUTH_SCHEMA) as tw:
        if workers > 1 and len(jobs) > 1:
            import multiprocessing as mp

            with mp.get_context("spawn").Pool(workers) as pool:
                for t_docs, t_truth in pool.imap(_block, jobs):
                    dw.write_table(t_docs, row_group_size=ROW_GROUP)
                    tw.write_table(t_truth)
        else:
            for job in jobs:
                t_docs, t_truth = _block(job)
                dw.write_table(t_docs, row_group_size=ROW_GROUP)
                tw.write_table(t_truth)
    return docs_path, truth_path


# --------------------------------------------------------------------------- consistency checks

def url_key_collisions(docs: Any, truth: Any, conf: "Config") -> dict[str, int]:
    """URL keys under conf: how many keys are shared by different clusters (a collapsed site),
    and how many url_variant documents do not share their origin's key (a missed variant).

    docs/truth: pandas DataFrames with id, url, source / id, cluster_id, kind, parent_id.
    """
    from newsdedup.stages import url as urls

    url_conf = conf.url
    scheme = url_conf.scheme_insensitive
    keys = {}
    for i, u, s in zip(docs["id"], docs["url"], docs["source"]):
        try:
            keys[int(i)] = urls.normalize_url(u, urls.rules_for(url_conf, s, urls.host_of(u)), scheme).key
        except urls.UrlError:
            keys[int(i)] = None
    clusters_by_key: dict[str, set] = {}
    for i, c in zip(truth["id"], truth["cluster_id"]):
        k = keys.get(int(i))
        if k is not None:
            clusters_by_key.setdefault(k, set()).add(int(c))
    collisions = sum(1 for cs in clusters_by_key.values() if len(cs) > 1)
    missed = sum(1 for i, kind, p in zip(truth["id"], truth["kind"], truth["parent_id"])
                 if kind == "url_variant" and keys.get(int(i)) != keys.get(int(p)))
    return {"colliding_keys": collisions, "missed_url_variants": missed}
