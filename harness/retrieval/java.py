"""Make pyserini's JVM findable (pyjnius needs JAVA_HOME), explain when Java is missing, and start it
so that it cannot take the harness's signals or write crash files where it runs.

pyjnius starts the JVM inside the harness's process. By default a JVM installs its own handlers for
SIGTERM, SIGINT and SIGHUP: once the BM25 search had started it, a SIGTERM during fine-tuning ran the
JVM's shutdown under torch's threads instead of the harness's "interrupted" path (exit 143 with no
message, ``RuntimeError: unknown parameter type`` tracebacks, a SIGSEGV, ``hs_err_pid<N>.log`` in the
working directory). ``-Xrs`` leaves those signals to Python (the JVM's own use of SIGSEGV and friends is
unchanged), and ``-XX:ErrorFile`` sends any crash report to the cache's ``logs/`` folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import jnius_config  # pyjnius's options holder: tiny, and it starts nothing

from harness.core.errors import HarnessError
from harness.core.paths import cache_dir


def ensure_java_home() -> str:
    home = os.environ.get("JAVA_HOME")
    if not (home and Path(home, "bin", "java").exists()):
        java = shutil.which("java")
        if java is None:
            raise HarnessError(
                "Java is not installed, and pyserini (Lucene) needs a JDK 17. "
                "Run `bash setup.sh` (it installs openjdk-17-jdk-headless with apt) or set JAVA_HOME."
            )
        home = str(Path(java).resolve().parent.parent)
        os.environ["JAVA_HOME"] = home
    configure_jvm()
    return home


def jvm_log_dir() -> Path:
    """Where a JVM crash report goes: the cache's ``logs/`` folder, never the working directory."""
    return cache_dir() / "logs"


def jvm_options() -> list[str]:
    """The options every JVM the harness starts gets (in-process, and the indexer's child via
    :func:`child_env`): signals stay the harness's, crash reports go under the cache."""
    return ["-Xrs", f"-XX:ErrorFile={jvm_log_dir() / 'hs_err_pid%p.log'}"]


def configure_jvm() -> None:
    """Give pyjnius :func:`jvm_options` before it starts this process's JVM (a no-op once it runs:
    the options of a running JVM cannot change, and the first start already had them)."""
    if jnius_config.vm_running:
        return
    jvm_log_dir().mkdir(parents=True, exist_ok=True)
    have = jnius_config.get_options()
    missing = [o for o in jvm_options() if o not in have]
    if missing:
        jnius_config.add_options(*missing)


def child_env() -> dict[str, str]:
    """The environment of a child process that starts its own JVM (pyserini's indexer): the same
    options, through JAVA_TOOL_OPTIONS (which every JVM reads at its start)."""
    jvm_log_dir().mkdir(parents=True, exist_ok=True)
    theirs = os.environ.get("JAVA_TOOL_OPTIONS", "")
    return {**os.environ, "JAVA_TOOL_OPTIONS": " ".join([*jvm_options(), theirs]).strip()}
