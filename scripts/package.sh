#!/usr/bin/env bash
# Build dist/newsdedup.zip for spark-submit --py-files (the package and its default config).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build/pyfiles && mkdir -p build/pyfiles dist
cp -rL lib/newsdedup build/pyfiles/
find build/pyfiles -name __pycache__ -prune -exec rm -rf {} +
(cd build/pyfiles && rm -f ../../dist/newsdedup.zip && python3 -m zipfile -c ../../dist/newsdedup.zip newsdedup)
echo "dist/newsdedup.zip"
