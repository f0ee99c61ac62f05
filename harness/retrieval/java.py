"""Make pyserini's JVM findable (pyjnius needs JAVA_HOME) and explain when Java is missing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.core.errors import HarnessError


def ensure_java_home() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return home
    java = shutil.which("java")
    if java is None:
        raise HarnessError(
            "Java is not installed, and pyserini (Lucene) needs a JDK 17. "
            "Run `bash setup.sh` (it installs openjdk-17-jdk-headless with apt) or set JAVA_HOME."
        )
    home = str(Path(java).resolve().parent.parent)
    os.environ["JAVA_HOME"] = home
    return home
