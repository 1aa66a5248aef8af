"""newsdedup_lab.same_outputs: identical outputs pass, one changed score or one superseded link does not."""

import numpy as np
import pandas as pd
import pyarrow as pa
from deltalake import write_deltalake

from newsdedup_lab import same_outputs


def write(out, score=0.9, superseded=None):
    docs = pd.DataFrame({"id": [1, 2], "title": ["a", "b"], "mh_bands": [[1, 2], [3, 4]], "run_id": ["r1", "r2"]})
    write_deltalake(f"{out}/documents", docs)
    links = pa.table({"duplicate_id": [2], "canonical_id": [1], "stage": ["simhash"], "score": [score],
                      "via_id": pa.array([1], pa.int64()), "run_id": ["r1"],
                      "reverted_at": pa.array([None], pa.timestamp("us")),
                      "superseded_at": pa.array([superseded], pa.timestamp("us"))})
    write_deltalake(f"{out}/duplicate_links", links)
    return str(out)


def test_identical_outputs_of_different_runs_are_the_same(tmp_path, capsys):
    assert same_outputs.main([write(tmp_path / "a"), write(tmp_path / "b")]) == 0
    assert "documents: 2 and 2 rows, identical" in capsys.readouterr().out


def test_a_score_one_bit_off_or_a_superseded_link_is_a_difference(tmp_path, capsys):
    import datetime

    a = write(tmp_path / "a")
    assert same_outputs.main([a, write(tmp_path / "b", score=float(np.nextafter(0.9, 1.0)))]) == 1
    assert same_outputs.main([a, write(tmp_path / "c", superseded=datetime.datetime(2026, 1, 1))]) == 1
    assert "only in the second" in capsys.readouterr().out
