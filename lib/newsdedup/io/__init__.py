"""Everything that touches storage: the input snapshot, the Delta tables, Postgres, the Spark session."""
