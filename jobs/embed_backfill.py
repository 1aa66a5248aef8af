"""spark-submit entry point: embed one bounded batch of documents lacking a vector of a model version.

    spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.0 --py-files dist/newsdedup.zip \
        --conf spark.executor.resource.gpu.amount=1 --conf spark.task.resource.gpu.amount=1 \
        jobs/embed_backfill.py --output s3://.../dedup --model BAAI/bge-m3 --model-version bge-m3@v1 --limit 50000

Run it repeatedly (cron, Airflow) until it prints remaining=0.
"""

import sys

from newsdedup.cli import main

if __name__ == "__main__":
    sys.exit(main(["embed-backfill", *sys.argv[1:]]))
