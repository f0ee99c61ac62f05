"""Signals with a live JVM (issue 40): once an in-process BM25 search has started pyserini's JVM, a
SIGTERM / SIGINT / SIGHUP during fine-tuning ends the run through the harness's own path (the
"interrupted" line, exit 128 + signal) with no traceback, no JVM crash and no ``hs_err_pid*.log``
anywhere: the JVM starts with ``-Xrs`` (it leaves those signals to Python) and ``-XX:ErrorFile`` under
the cache's logs/ folder (harness/retrieval/java.py). Before, three tries of five gave exit 134
(abort) or 143 with ``RuntimeError: unknown parameter type`` tracebacks and an hs_err file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.core.paths import PROJECT_ROOT
from harness.retrieval import java

# A command whose work is what `run` does around the signal: an in-process BM25 search (the JVM starts),
# then a torch optimiser loop, as fine-tuning runs one, until the signal comes.
CHILD = textwrap.dedent("""
    import argparse, faulthandler, signal, sys
    from pathlib import Path
    import harness.cli as cli

    faulthandler.register(signal.SIGUSR2)  # the test asks for every thread's stack when the child hangs

    def work(args):
        from harness.retrieval.bm25 import search
        run = search(Path(sys.argv[1]), {"q1": "hello topic", "q2": "document 5"}, k=10, k1=0.9, b=0.4,
                     fields={"contents": 1.0})
        assert run["q1"]
        import torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
        opt = torch.optim.AdamW(model.parameters())
        print("training", flush=True)
        while True:
            loss = model(torch.randn(128, 256)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    def parser():
        p = argparse.ArgumentParser()
        p.set_defaults(func=work, command="run")  # stands for a run: what it finished is cached
        return p

    cli.build_parser = parser
    sys.exit(cli.main([]))
""")


def test_every_jvm_the_harness_starts_leaves_signals_to_python_and_crash_files_under_the_cache(tmp_path):
    options = java.jvm_options()
    assert "-Xrs" in options and f"-XX:ErrorFile={tmp_path / 'cache' / 'logs'}/hs_err_pid%p.log" in options
    assert java.child_env()["JAVA_TOOL_OPTIONS"].split()[:2] == options  # the indexer's own JVM
    import jnius_config

    if not jnius_config.vm_running:  # another test of this process may have started the JVM already
        java.configure_jvm()
        assert set(options) <= set(jnius_config.get_options())


@pytest.fixture(scope="module")
def small_index(tmp_path_factory) -> Path:
    from harness.retrieval.bm25 import build_index

    root = tmp_path_factory.mktemp("jvm-index")
    corpus = {
        f"d{i}": {"title": f"t{i}", "text": f"hello world document number {i} about topic {i % 7}"} for i in range(200)
    }
    build_index(corpus, root / "index", {"contents": 1.0})
    return root / "index"


def _terminal_dispositions() -> None:
    """The child gets the signal dispositions of a command typed at a terminal. Started under `nohup` or
    as a background job of a non-interactive shell, pytest has SIGHUP / SIGINT ignored and its children
    inherit that; the harness rightly leaves an ignored signal ignored (procs.signal_handlers), so the
    child would never stop (both cases timed out when the suite ran under `nohup ... &`)."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


# Not `alone`: the signal goes in once the child prints "training" and it loops until then, so a loaded machine
# only slows the child's start (6.7 s each alone on the AMD EPYC 26/2, most of it the JVM's and torch's start).
@pytest.mark.slow
@pytest.mark.parametrize(
    "signum",
    [signal.SIGTERM] * 5 + [signal.SIGINT, signal.SIGHUP],
    ids=[f"SIGTERM-{i}" for i in range(1, 6)] + ["SIGINT", "SIGHUP"],
)
def test_a_signal_during_fine_tuning_with_the_jvm_up_is_a_clean_interrupt(signum, small_index, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    work = tmp_path / "cwd"  # where a JVM would drop hs_err_pid<N>.log by default
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HARNESS_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("JAVA_TOOL_OPTIONS", None)
    out, err = work / "out.txt", work / "err.txt"
    with out.open("w") as fout, err.open("w") as ferr:
        child = subprocess.Popen(
            [sys.executable, str(script), str(small_index)],
            cwd=work,
            env=env,
            stdout=fout,
            stderr=ferr,
            preexec_fn=_terminal_dispositions,
        )
    try:
        deadline = time.monotonic() + 180
        while "training" not in out.read_text() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert child.poll() is None, err.read_text()[-3000:]
        time.sleep(1.0)  # well into the optimiser loop
        child.send_signal(signum)
        try:
            code = child.wait(timeout=60)
        except subprocess.TimeoutExpired:  # say where it hangs
            child.send_signal(signal.SIGUSR2)
            time.sleep(2)
            pytest.fail(f"no exit 60 s after {signum.name}; the child's threads:\n{err.read_text()[-6000:]}")
    finally:
        if child.poll() is None:
            child.kill()
    text = err.read_text()
    assert code == 128 + signum, f"exit {code}:\n{text[-3000:]}"
    assert "interrupted: finished stages are cached" in text and "Traceback" not in text, text[-3000:]
    assert not list(work.glob("hs_err*")) and not list(PROJECT_ROOT.glob("hs_err*"))
    assert not list((tmp_path / "cache" / "logs").glob("hs_err*"))  # nor a crash reported where it belongs


def test_the_lucene_heap_is_bounded_by_the_index_and_the_machine_and_overridable(tmp_path, monkeypatch):
    monkeypatch.delenv(java.HEAP_ENV, raising=False)
    assert java.lucene_heap(None, memory_mib=64 * 1024)[0] == "-Xmx1g"  # not the JVM's default 16g
    index = tmp_path / "index"
    index.mkdir()
    (index / "segment").write_bytes(b"\0" * (8 * 2**20))  # 8 MiB on disk: +1 MiB, one more step
    assert java.lucene_heap(index, memory_mib=64 * 1024)[0] == "-Xmx1280m"
    heap, why = java.lucene_heap(None, memory_mib=2048)  # a small machine: a quarter, never below 512m
    assert heap == "-Xmx512m" and "quarter of 2 GiB" in why
    monkeypatch.setenv(java.HEAP_ENV, "3g")
    assert java.lucene_heap(index)[0] == "-Xmx3g"
    monkeypatch.setenv(java.HEAP_ENV, "lots")
    with pytest.raises(java.HarnessError, match="HARNESS_LUCENE_HEAP"):
        java.lucene_heap(index)


def test_the_heap_is_the_last_search_s_until_the_jvm_starts_and_a_callers_own_stays(tmp_path, monkeypatch, capsys):
    import jnius_config

    if jnius_config.vm_running:
        pytest.skip("this process's JVM runs already: its options are fixed")
    monkeypatch.delenv(java.HEAP_ENV, raising=False)
    monkeypatch.setattr(jnius_config, "options", [])
    monkeypatch.setattr(java, "_ours", [])
    big = tmp_path / "big"
    big.mkdir()
    (big / "segment").write_bytes(b"\0" * (8 * 2**20))
    java.configure_jvm(None, heap=False)  # an indexer's child: no heap of this process's yet
    assert not any(o.startswith("-Xmx") for o in jnius_config.get_options())
    java.configure_jvm(None)
    java.configure_jvm(big)
    heaps = [o for o in jnius_config.get_options() if o.startswith("-Xmx")]
    assert heaps == ["-Xmx1280m"] and "-Xrs" in jnius_config.get_options()
    assert capsys.readouterr().err.count("Lucene heap: ") == 2  # said when it changes
    jnius_config.set_options("-Xmx300m")
    java.configure_jvm(big)
    assert [o for o in jnius_config.get_options() if o.startswith("-Xmx")] == ["-Xmx300m"]
