"""Stage 4: semantic near-duplicates: the same event from another outlet, possibly in another language.

Read in this order; imports flow down the list, never up:

- `packaged_models.py`  models whose weights come from pip packages (the offline fallbacks)
- `embeddings.py`       which model runs (model_version, languages, calibrated thresholds),
                        loading, ONNX/int8 backends, batched encoding; no Spark
- `evidence.py`         the facts of one text (numbers, scores, days, names) and the verdict
                        on a pair: the cosine proposes, the evidence decides; no Spark
- `search.py`           exact cosine inside 48-hour windows, block against block, per
                        language-pair thresholds, then the evidence
- `step.py`             the Spark step (`SemanticStage`): vectors on the executors, stored and
                        reused per model_version, the search, refusals, earliest-canonical
                        links; and `backfill` (newsdedup embed-backfill)

This file imports nothing, so that `embeddings` can be used (by `newsdedup run` before
Spark starts, by `check`) without loading Spark or torch.
"""
