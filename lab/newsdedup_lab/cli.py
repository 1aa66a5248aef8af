"""The lab's commands: `newsdedup eval`, `newsdedup bench`, `newsdedup calibrate`.

The job's command line finds them through the `newsdedup.commands` entry points
this package declares (pyproject.toml) and hands over the rest of the command
line; the job never imports the lab. Each function takes argv (after the
command name) and returns an exit status; a UserError or ValueError raised here
is printed by the job's command line as one line, like its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from newsdedup import config


def _parser(command: str, help_text: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"newsdedup {command}", description=help_text)
    p.add_argument("--conf", help="YAML file merged over conf/default.yaml")
    p.add_argument("--verbose", action="store_true", help="show Ivy's and Spark's own log on stderr")
    return p


def _parse(p: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    args = p.parse_args(argv)
    if args.verbose:
        os.environ["NEWSDEDUP_VERBOSE"] = "1"   # read by newsdedup.io.spark when the session is built
    return args


EVAL_HELP = "precision/recall/F1 per stage on a labelled corpus (synthetic or real), distance plot"


def eval_main(argv: list[str]) -> int:
    p = _parser("eval", EVAL_HELP)
    p.add_argument("--docs", type=int, default=5000, help="documents to generate (ignored with --input)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--input", help="an existing corpus (Parquet, job input schema) instead of generating one")
    p.add_argument("--truth", help="its ground truth (Parquet: id, cluster_id, kind, lang, template_id, parent_id)")
    p.add_argument("--output", default="out/eval", help="directory for the corpus, eval.json and the plot")
    p.add_argument("--plot", help="PNG path of the SimHash distance plot (default: OUTPUT/simhash_distances.png)")
    p.add_argument("--must-not-link", help="pairs that must stay apart (Parquet: a, b, kind), "
                                           "e.g. must_not_link.parquet from python -m newsdedup_lab.realtext")
    args = _parse(p, argv)
    from newsdedup.io.spark import get_spark

    from . import evaluate

    # Stages 1-3 only: stage 4 has its own calibration (newsdedup calibrate).
    conf = config.load_config(args.conf, overrides={"semantic": {"enabled": False}})
    spark = get_spark(conf, "newsdedup-eval")
    ev = evaluate.run_eval(spark, conf, args.output, n_docs=args.docs, seed=args.seed,
                           input_path=args.input, truth_path=args.truth, plot=args.plot,
                           must_not_link_path=args.must_not_link)
    print(evaluate.report_text(ev))
    print(f"\nwrote {args.output}/eval.json and {args.plot or args.output + '/simhash_distances.png'}")
    return 0


BENCH_HELP = "docs/s per stage, peak memory and baselines on synthetic corpora"


def bench_main(argv: list[str]) -> int:
    p = _parser("bench", BENCH_HELP)
    p.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated corpus sizes (10k, 1m allowed)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default="docs/benchmarks.md", help="Markdown report")
    p.add_argument("--work", default="out/bench", help="directory for the generated corpora")
    p.add_argument("--allpairs-sample", type=int, default=4000, help="documents in the all-pairs SimHash sample; 0 skips")
    p.add_argument("--embed-sample", type=int, default=256, help="documents embedded to time baseline (c); 0 skips")
    p.add_argument("--minhash-limit", type=float, default=900, help="seconds before MinHashLSH is cancelled; 0 skips")
    p.add_argument("--no-text-cost", action="store_true", help="skip measuring title/body in the documents table")
    p.add_argument("--job-only", action="store_true",
                   help="time the stage 1-3 job alone, without baselines (d) and (e) (sizes where they add hours)")
    p.add_argument("--stage3-only", action="store_true",
                   help="time stage 3 alone on features computed once per corpus, beside a banded MinHash LSH "
                        "(default report: docs/benchmarks-stage3.md)")
    args = _parse(p, argv)
    from newsdedup.io.spark import get_spark

    from . import bench

    # Stages 1-3 only: stage 4's search is benched by newsdedup_lab.bench_semantic.
    conf = config.load_config(args.conf, overrides={"semantic": {"enabled": False}})
    spark = get_spark(conf, "newsdedup-bench")
    command = "newsdedup bench " + " ".join(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    if args.stage3_only:
        import platform

        from . import bench_stage3

        machine = f"{platform.machine()}, {os.cpu_count()} cores, Spark master {spark.sparkContext.master}"
        out = Path(args.out if args.out != "docs/benchmarks.md" else "docs/benchmarks-stage3.md")
        results = bench_stage3.run(spark, conf, bench.parse_sizes(args.sizes), args.seed, args.work,
                                   on_progress=lambda r: out.write_text(bench_stage3.markdown(r, command, machine)))
        print(bench_stage3.markdown(results, command, machine))
        return 0

    def save(partial: "bench.Bench") -> None:   # rewritten after every size
        out.write_text(bench.markdown(partial), encoding="utf-8")

    result = bench.run_bench(spark, conf, bench.parse_sizes(args.sizes), seed=args.seed, root=args.work,
                             allpairs_n=args.allpairs_sample, embed_sample=args.embed_sample,
                             minhash_limit_s=args.minhash_limit, command=command, on_progress=save,
                             text_cost=not args.no_text_cost, job_only=args.job_only)
    print(bench.markdown(result))
    return 0


CALIBRATE_HELP = "stage-4 precision/recall per threshold on labelled pairs, thresholds per model_version"


def calibrate_main(argv: list[str]) -> int:
    p = _parser("calibrate", CALIBRATE_HELP)
    p.add_argument("--pairs", default="samples/semantic_pairs.jsonl", help="labelled pairs (JSON lines)")
    p.add_argument("--output", default="out/calibration", help="directory for the PNG, JSON and YAML snippet")
    p.add_argument("--model", help="sentence-transformers name or local path (default: the model stage 4 would run)")
    p.add_argument("--model-version", help="version tag to calibrate (default: derived like stage 4)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default: semantic.device")
    p.add_argument("--target-precision", type=float, default=1.0,
                   help="precision each language pair's threshold must reach on the labelled pairs (default 1.0: "
                        "no different-event pair linked)")
    p.add_argument("--cross-language", action="store_true",
                   help="measure pairs of two languages too, even where the model's entry does not compare them")
    args = _parse(p, argv)
    from . import calibrate

    conf = config.load_config(args.conf)
    result = calibrate.run(conf.semantic, args.pairs, args.output, model=args.model,
                           model_version=args.model_version, device=args.device, target=args.target_precision,
                           cross_language=True if args.cross_language else None)
    print(calibrate.report_text(result))
    return 0


if __name__ == "__main__":   # python -m newsdedup_lab.cli eval ...
    commands = {"eval": eval_main, "bench": bench_main, "calibrate": calibrate_main}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: python -m newsdedup_lab.cli {{{','.join(commands)}}} ...")
    sys.exit(commands[sys.argv[1]](sys.argv[2:]))
