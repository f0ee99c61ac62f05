"""Leaf helpers every layer may use: errors, paths, files and locks, child processes, threads, hardware, status words, the benchmark declarations.

Nothing here imports another package of the harness (tests/test_import_graph.py keeps the layers).
"""
