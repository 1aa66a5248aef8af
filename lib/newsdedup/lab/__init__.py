"""Lab tools that use the job but are never imported by it: synthetic corpus, evaluation, benchmarks."""
