"""MLflow's requests, bounded: where the store is, a timeout and a retry count on every HTTP request, a
short ``/health`` check before a run, and an MLflow error as one line.

MLflow's own defaults retry for minutes, so a tracking server that accepts connections and never
answers hung a run; bounded (:data:`HTTP_BOUNDS`) and checked first (:func:`probe`), it costs seconds.
"""

from __future__ import annotations

import os
import re
import socket
import urllib.error
import urllib.parse
import urllib.request

from harness.core.paths import runs_dir


def default_tracking_uri() -> str:
    """The MLflow store a run logs to: ``MLFLOW_TRACKING_URI``, else the project's ``runs/mlflow.db``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{runs_dir() / 'mlflow.db'}"


# MLflow's HTTP client, bounded (a user's own setting wins): its defaults are a 120 s timeout and 7
# retries with backoff, minutes per request, and a server that accepts and never answers hung a run
# after its last stage. Read by mlflow.utils.rest_utils at each request.
HTTP_BOUNDS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}
PROBE_TIMEOUT = 3.0  # seconds the /health check waits for an answer
_MESSAGE_LIMIT = 240


def bound_mlflow_requests() -> None:
    """Set :data:`HTTP_BOUNDS` where the user has not set them (before any MLflow request)."""
    for key, value in HTTP_BOUNDS.items():
        os.environ.setdefault(key, value)


def probe(uri: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why an http(s) tracking server cannot take this run's logging, in one line, or None. A real
    request (``GET <uri>/health``, which an MLflow server answers "OK"), not a TCP connect: a server that
    accepts the connection and never answers passed the connect and hung the run."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return None
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout) as response:
            response.read(64)
        return None
    except urllib.error.HTTPError as exc:  # its page is never shown: it buried the warning in HTML
        return f"tracking server answered HTTP {exc.code} {exc.reason} to GET {url}"
    except TimeoutError:
        return f"tracking server {uri} did not answer GET {url} within {timeout:g} s"
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return f"tracking server {uri} did not answer GET {url} within {timeout:g} s"
        return f"tracking server {uri} is unreachable ({getattr(reason, 'strerror', None) or reason})"
    except (OSError, ValueError) as exc:  # a reset connection, a malformed answer or URL
        return f"tracking server {uri} failed GET {url} ({type(exc).__name__}: {one_line(str(exc))})"


def one_line(text: str) -> str:
    """An MLflow error as one short line: its status code and URL when it is an HTTP error (MLflow
    appends the server's whole response body, an HTML page for a 404 or a proxy's 5xx), else its first
    line, cut to a few hundred characters."""
    text = str(text)
    code = re.search(r"error code (\d{3})", text) or re.search(r"too many (\d{3}) error responses", text)
    where = re.search(r"(https?://[^\s'\"]+)", text) or re.search(r"endpoint (/\S+)", text)
    if code:
        return f"HTTP {code.group(1)}" + (f" from {where.group(1).rstrip('.,:')}" if where else "")
    first = text.split("Response body:", 1)[0].strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= _MESSAGE_LIMIT else first[:_MESSAGE_LIMIT] + " ..."
