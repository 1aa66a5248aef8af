def test_fixtures(spark, pg_dsn):
    import psycopg
    assert spark.range(3).count() == 3
    with psycopg.connect(pg_dsn) as c:
        assert c.execute("select 1").fetchone()[0] == 1
