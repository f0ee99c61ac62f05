"""What a run leaves behind: the sealed run record, its integrity check, and MLflow tracking.

``store.py`` loads and validates records; ``integrity.py`` seals them and recomputes their aggregates;
``tracking.py`` writes MLflow runs and records; ``mlflow_import.py`` loads committed records into an
MLflow store (``ui``).
"""
