"""Named points where a fault-injection test can hold a run, so that its fault lands there.

A Postgres load stages its rows and merges them within milliseconds on a small input: a test
that polls for staged rows and then kills the driver or stops the server misses that window on
a fast machine. With NEWSDEDUP_PAUSE_AT naming a point (comma-separated for several), the run
prints `paused at <point>` on stderr when it gets there and waits NEWSDEDUP_PAUSE_SECONDS (10 by
default) before it goes on: the test injects its fault inside that pause. Unset, a point costs
one environment lookup.
"""

from __future__ import annotations

import os
import sys
import time

PAUSE_AT = "NEWSDEDUP_PAUSE_AT"
PAUSE_SECONDS = "NEWSDEDUP_PAUSE_SECONDS"


def pause(point: str) -> None:
    wanted = os.environ.get(PAUSE_AT)
    if not wanted or point not in wanted.split(","):
        return
    print(f"paused at {point}", file=sys.stderr, flush=True)
    time.sleep(float(os.environ.get(PAUSE_SECONDS, "10")))
