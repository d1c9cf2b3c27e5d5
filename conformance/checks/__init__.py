"""Stage 3, checks: one module per check (its contract in its docstring), registered by id.

Every module directly in this package is a check (`common.registry`); code
the checks share lives in `common/`.
"""
