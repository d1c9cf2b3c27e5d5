"""The matrix: one test per registered check (`test_<check id>`), parametrized over the selected classes.

Nothing to edit here when a check is added: registering it in
`conformance/checks/` gives it its test (`conformance.run.cells`).
"""

from conformance.run.cells import matrix_tests

globals().update(matrix_tests())
