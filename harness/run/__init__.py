"""One invocation end to end: check the spec, plan, run the family's pipeline, score, write the record.

``runner.py`` drives a method run from its plan (``run_plan.py``: built once per invocation) to its
typed result (``run_result.py``); ``validation.py`` checks a resolved spec's values before any stage and
``preflight.py`` every input (data, checkpoints) the whole plan reads, ``device_check.py`` the card,
``process_check.py`` the process count and batch split; ``plan.py`` and ``projection.py`` are the dry-run's
plan and cost, ``model_shape.py`` the encoder shape that cost scales with, ``generation_flops.py`` query
generation's FLOPs (T5 encoder + decoder per token) and ``footprint.py`` each data stage's memory and disk;
``launch.py`` starts the worker processes of a multi-process run; ``scores.py`` and ``record.py`` score the run files and build the record;
``reproduce.py`` scores and grades a released checkpoint; ``table_plan.py`` plans the runs of a printed table
(``table --dry-run``: each one's cost and the stage keys it shares with an earlier one); ``seed_study.py`` runs one spec under several
fine-tuning seeds (``run --seeds``) whose records feed sigma_rep.
"""
