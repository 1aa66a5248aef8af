"""spark-submit entry point for the dedup cascade.

    spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.0 \
        --py-files dist/newsdedup.zip jobs/dedup.py --input s3://.../snapshot --output s3://.../dedup

A backfill's slices in one submission (each a run of its own, in order): --input s3://.../2019 s3://.../2020
"""

import sys

from newsdedup.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
