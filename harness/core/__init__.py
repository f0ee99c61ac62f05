"""Leaf helpers every layer may use: errors, paths, files and locks, child processes, threads, hardware, status words, the benchmark declarations.

``errors.py`` the errors the CLI prints as one message; ``paths.py`` where things live; ``fsutil.py``
atomic files and locks; ``procs.py`` child processes and signals; ``threads.py`` and ``ranks.py`` the cores
and the rank a process has; ``hardware.py`` and ``memory.py`` the machine; ``statuses.py`` every status
word; ``benchmarks.py`` every benchmark, declared once in benchmarks.yaml; ``points.py`` and ``text_table.py`` numbers and
tables as printed; ``chunks.py`` an iterable read in fixed-size lists; ``numerics.py`` the numeric helpers every loss shares; ``yamlsafe.py`` YAML
loading with alias expansion, depth and size bounded; ``jsonsafe.py`` JSON with the same bounds; ``digests.py``
the sampled digest of a very large file; ``env_controls.py`` every ``HARNESS_*`` control, checked at start-up;
``seeds.py`` the default seed (42), a default argument, never read from the environment.

Nothing here imports another package of the harness (tests/test_import_graph.py keeps the layers).
"""
