"""MLflow's and SQLAlchemy's own log records, held during a call: dropped when the call fails (each is a
60-line traceback; the tracker's one warning line says what failed), shown when it succeeds."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

# Loggers whose records of a failing call are a traceback per call (mlflow.store.db.utils logs each
# SQLAlchemy error with its stack): the one warning line says what failed.
_NOISY_LOGGERS = ("mlflow", "sqlalchemy", "alembic")


class LogHold(logging.Handler):
    """A handler that keeps the records it is given, for :func:`replay_held` to show later."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def held_logs() -> Iterator[LogHold]:
    """Hold the MLflow / SQLAlchemy log records emitted inside the block (the loggers' own handlers and
    propagation are off meanwhile); the caller replays them (:func:`replay_held`) when the call succeeded."""
    hold = LogHold()
    saved = []
    for name in _NOISY_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate))
        logger.handlers[:] = [hold]
        logger.propagate = False
    try:
        yield hold
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers[:] = handlers
            logger.propagate = propagate


def replay_held(hold: LogHold) -> None:
    """A succeeded call's held records, as they would have been shown (e.g. MLflow's warnings)."""
    for record in hold.records:
        logging.getLogger(record.name).handle(record)
