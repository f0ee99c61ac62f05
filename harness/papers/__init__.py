"""The papers' numbers: the reported-scores registry and the released checkpoints.

* :mod:`harness.papers.schema`: what a registry file may say (keys, conditions, units) and the
  cells, tables and papers it is read into.
* :mod:`harness.papers.parsing`: one YAML file read and checked, every problem naming its line.
* :mod:`harness.papers.registry`: every file of ``baselines/reported/`` loaded, cached and queried.
* :mod:`harness.papers.consistency` and :mod:`harness.papers.text_claims`: the papers' numbers
  checked against themselves (averages, bold marks, versions, the claims of their text);
  :mod:`harness.papers.table_grid` addresses a table's cells by row and column for those findings.
* :mod:`harness.papers.replication`: pairs of independent runs of one system in the registry, how far
  two honest runs at paper scale land apart.
* :mod:`harness.papers.citation`: one name per paper, "Wu et al. 2023 (QC v2), Table 1", on every surface.
* :mod:`harness.papers.released`: the released checkpoints and the reported rows each one is.
* :mod:`harness.papers.model_pins`: the published checkpoints a run starts from (model_pins.yaml): pinned
  revisions and sha256s, fetched, checked before a run, named in its record.
"""
