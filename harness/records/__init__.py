"""What a run leaves behind: the sealed run record, its integrity check, and MLflow tracking.

``run_record.py`` is the record's one typed class, both written and read (its JSON kept byte for byte);
``writer.py`` writes records (their run id and path) and ``store.py`` loads and validates them;
``run_precision.py`` the precision a record's training stages used (its label on every surface);
``integrity.py`` seals them and recomputes their aggregates; ``environment.py`` captures where a run ran
(git, packages, hardware). MLflow: ``tracker.py`` is a run's client (a parent run and a nested run per
stage, best-effort), ``parent_run.py`` what its parent run is named and holds, ``mlflow_keys.py`` the keys
and values MLflow accepts, ``mlflow_requests.py`` its bounded requests, ``mlflow_logs.py`` its log
records held during a call, ``runs_view.py`` the runs table's columns; ``mlflow_import.py`` loads
committed records into an MLflow store (``ui``).
"""
