"""Make pyserini's JVM findable (pyjnius needs JAVA_HOME), explain when Java is missing, and start it
so that it cannot take the harness's signals or write crash files where it runs.

pyjnius starts the JVM inside the harness's process. By default a JVM installs its own handlers for
SIGTERM, SIGINT and SIGHUP: once the BM25 search had started it, a SIGTERM during fine-tuning ran the
JVM's shutdown under torch's threads instead of the harness's "interrupted" path (exit 143 with no
message, ``RuntimeError: unknown parameter type`` tracebacks, a SIGSEGV, ``hs_err_pid<N>.log`` in the
working directory). ``-Xrs`` leaves those signals to Python (the JVM's own use of SIGSEGV and friends is
unchanged), and ``-XX:ErrorFile`` sends any crash report to the cache's ``logs/`` folder.

The heap is bounded too (``-Xmx``, :func:`lucene_heap`): a JVM's default maximum is a quarter of the
machine's memory, and inside the harness's process that heap came on top of the model's: the retriever
stages peaked at 8.8 GiB RSS, and the bench's BM25 retrieve grew 1,650 -> 2,850 MiB from 100k to 1M
passages while the searches need a small, steady heap (Lucene reads its index through memory maps,
outside the heap). The bound is a function of the index searched and the machine's memory, printed
on stderr as ``Lucene heap: -Xmx...`` when it is set (a run's first BM25 or impact search);
``HARNESS_LUCENE_HEAP`` (e.g. ``4g``) overrides it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import jnius_config  # pyjnius's options holder: tiny, and it starts nothing

from harness.core.errors import HarnessError
from harness.core.paths import cache_dir

HEAP_ENV = "HARNESS_LUCENE_HEAP"
HEAP_BASE_MIB = 1024  # a BM25 / impact searcher's steady heap, with room for a batch's hits
HEAP_MIN_MIB = 512
HEAP_STEP_MIB = 256
_ours: list[str] = []  # the -Xmx this module gave pyjnius (replaced until the JVM starts), as printed


def _memory_mib() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):  # not a POSIX sysconf
        return None


def _index_mib(index_dir: Path | None) -> float:
    if index_dir is None or not Path(index_dir).is_dir():
        return 0.0
    return sum(f.stat().st_size for f in Path(index_dir).rglob("*") if f.is_file()) / 2**20


def lucene_heap(
    index_dir: Path | None = None, memory_mib: int | None = None, index_mib: float | None = None
) -> tuple[str, str]:
    """The ``-Xmx`` option of the harness's JVMs and why: 1 GiB plus an eighth of the index on disk,
    in steps of 256 MiB, at most a quarter of the machine's memory (the JVM's own default, never above
    it), at least 512 MiB; ``HARNESS_LUCENE_HEAP`` (``4g``, ``1536m``) replaces it. ``index_mib``: the
    index's size when it is not built yet (the dry-run's projection)."""
    given = os.environ.get(HEAP_ENV, "").strip().lower()
    if given:
        if not (given[:-1].isdigit() and given[-1] in "mg"):
            raise HarnessError(f"{HEAP_ENV}={given!r} is not a heap size such as 2g or 1536m")
        return f"-Xmx{given}", f"from {HEAP_ENV}"
    index = _index_mib(index_dir) if index_mib is None else index_mib
    want = HEAP_BASE_MIB + index / 8
    mib = -(-int(want) // HEAP_STEP_MIB) * HEAP_STEP_MIB
    memory = _memory_mib() if memory_mib is None else memory_mib
    why = f"1 GiB + 1/8 of the index's {index:,.0f} MiB"
    if memory:
        cap = max(HEAP_MIN_MIB, memory // 4 // HEAP_STEP_MIB * HEAP_STEP_MIB)
        if mib > cap:
            mib, why = cap, why + f", capped at a quarter of {memory / 1024:.0f} GiB memory"
        else:
            why += f", at most a quarter of {memory / 1024:.0f} GiB memory"
    mib = max(HEAP_MIN_MIB, mib)
    size = f"{mib // 1024}g" if mib % 1024 == 0 else f"{mib}m"
    return f"-Xmx{size}", why


def ensure_java_home(index_dir: Path | None = None, in_process: bool = True) -> str:
    """JAVA_HOME set (found from ``java`` on the PATH) and this process's JVM options given, its heap
    sized for ``index_dir`` (the index about to be searched); ``in_process=False``: only a child JVM
    (the indexer) is about to start, and this process's heap is left to its first search."""
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
    configure_jvm(index_dir, heap=in_process)
    return home


def jvm_log_dir() -> Path:
    """Where a JVM crash report goes: the cache's ``logs/`` folder, never the working directory."""
    return cache_dir() / "logs"


def jvm_options() -> list[str]:
    """The options every JVM the harness starts gets (in-process, and the indexer's child via
    :func:`child_env`): signals stay the harness's, crash reports go under the cache."""
    return ["-Xrs", f"-XX:ErrorFile={jvm_log_dir() / 'hs_err_pid%p.log'}"]


def configure_jvm(index_dir: Path | None = None, heap: bool = True) -> None:
    """Give pyjnius :func:`jvm_options` and the heap bound of :func:`lucene_heap` for ``index_dir`` before
    it starts this process's JVM (a no-op once it runs: the options of a running JVM cannot change, and the
    first start already had them). A later call before the start replaces this module's bound; a caller's
    own ``-Xmx`` stays. The heap line goes to stderr (stdout may be a --json or a pipe's data) when it changes."""
    if jnius_config.vm_running:
        return
    jvm_log_dir().mkdir(parents=True, exist_ok=True)
    have = [o for o in jnius_config.get_options() if o not in _ours]
    missing = [o for o in jvm_options() if o not in have]
    if any(o.startswith("-Xmx") for o in have):  # a caller's own bound (a test, a bench)
        _ours.clear()
    elif heap:
        bound, why = lucene_heap(index_dir)
        if _ours != [bound]:
            print(f"Lucene heap: {bound} ({why})", file=sys.stderr, flush=True)
        _ours[:] = [bound]
    options = have + missing + _ours
    if options != jnius_config.get_options():
        jnius_config.set_options(*options)


def release_heap() -> None:
    """A full collection of this process's JVM after a search: G1 then gives the heap's free part back
    to the system, which it otherwise keeps for the rest of the run (the fine-tuning stages after a
    BM25 search). Measured on NFCorpus's index, 3,000 queries at k=1000: 1,714 -> 1,162 MiB RSS within a
    second (G1 uncommits concurrently)."""
    if not jnius_config.vm_running:
        return
    from jnius import autoclass  # the JVM runs: importing jnius starts nothing new

    autoclass("java.lang.System").gc()


def child_env() -> dict[str, str]:
    """The environment of a child process that starts its own JVM (pyserini's indexer): the same
    options, through JAVA_TOOL_OPTIONS (which every JVM reads at its start)."""
    jvm_log_dir().mkdir(parents=True, exist_ok=True)
    theirs = os.environ.get("JAVA_TOOL_OPTIONS", "")
    return {**os.environ, "JAVA_TOOL_OPTIONS": " ".join([*jvm_options(), theirs]).strip()}
