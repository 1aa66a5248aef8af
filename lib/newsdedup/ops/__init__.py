"""Operations on a finished output: revert links, link statistics, URL migration of Postgres tables."""
