"""The lab: synthetic and real-text corpora, evaluation, calibration and benchmarks.

A package of its own beside the job (`newsdedup`): it imports the job, the job
never imports it, and the spark-submit zip (scripts/package.sh) does not carry
it. `newsdedup eval`, `newsdedup bench` and `newsdedup calibrate` reach it
through the `newsdedup.commands` entry points (cli.py); every other tool runs
as `python -m newsdedup_lab.<module>`.
"""
