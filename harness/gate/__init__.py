"""The CI regression gate (`python -m harness check`), one module per job.

* :mod:`harness.gate.admission`: what a record must satisfy to be graded or accepted (seal,
  the catalog's data, a known method, spec or checkpoint).
* :mod:`harness.gate.references`: which record is a (method, profile)'s reference (one per precision), and
  ``check --accept``.
* :mod:`harness.gate.closing_check`: a finished run against the committed reference of its precision, the
  line `run` ends with.
* :mod:`harness.gate.grading`: the rows of one record against the papers' cells, against its
  reference, and the paired effects.
* :mod:`harness.gate.labels`: the printed name of the system a cell belongs to (the gate, the
  report and the leaderboard label cells alike).
* :mod:`harness.gate.cell_state`: each papers' cell's one state for a set of records, and the run that
  would grade it or why none can (every surface reads it).
* :mod:`harness.gate.answer`: the answer first: claims tested at paper scale, reproduced, different, and
  what no run can grade with its reason (check, the README, the report and the leaderboard print it).
* :mod:`harness.gate.tables`: every printed table as its runs (deduplicated, each with the cells it grades)
  and its counts: cells, how many a run can grade, why the rest cannot (`table`, the glance tab, the report).
* :mod:`harness.gate.run`: every record through all of it, the verdict and its table.
* :mod:`harness.gate.summary`: what `check` prints first: the verdict and counts in one line, the
  failing rows, and what ``--all`` would add.
* :mod:`harness.gate.rerun`: ``check --rerun``, methods run again from an empty cache and their fresh
  numbers gated.
* :mod:`harness.gate.own_numbers`: a researcher's own numbers graded by the same rule (``grade --metrics``).
"""
