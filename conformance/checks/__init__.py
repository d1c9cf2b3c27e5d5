"""Stage 3, checks: one module per check (its contract in its docstring), registered by id.

Every module directly in this package registers checks (`common.registry`): one, or a family declared as a table
(`exporter_columns`: a check per row of `common.exporter_table`, each contract in its function's docstring); code
the checks share lives in `common/`.
"""
