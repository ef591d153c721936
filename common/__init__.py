"""Helpers every layer may import, and that import nothing of ours: where the product writes and how
(``outputs``: default folders, paths checked before work starts, atomic writes, a command line's exit),
and names looked up with a "did you mean" (``naming``); and a throw-away PostgreSQL server that the tests
and the benchmarks start (``postgres_server``)."""
