"""The Program as SQL: whole-population queries on DuckDB (embedded) and Spark.

See ``docs/sql.md``. The per-request path stays in process; these answer the access
matrix, ``who_can`` and ``what_can`` over populations too large to hold as Python objects,
and stream the answers to Parquet or CSV.
"""
