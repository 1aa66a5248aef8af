"""spark-submit entry point that (re)loads duplicate_links from Delta into Postgres."""

import sys

from newsdedup.cli import main

if __name__ == "__main__":
    sys.exit(main(["load", *sys.argv[1:]]))
