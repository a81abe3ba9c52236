"""The notebooks run headless (nbclient) and the asserts inside them hold.

``quickstart.ipynb`` (a fake chat model) and ``latency_and_recall.ipynb`` (LoCoMo from
``../shared/data``) run on the embedded stores; ``remote_client.ipynb`` talks to a real server
started here (embedded stores, the embedded LLM), whose URL it reads from
``MEMORY_CHAIN_URL``; ``agent_with_memory.ipynb`` runs an agent on the embedded model;
``import_history.ipynb`` imports a ChatGPT-style export and asks about it. A
failing cell fails the test with the cell's traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.needs import missing
from tests.servers import RunningServer

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel inherits this process's environment: no stray settings.
    for name in list(os.environ):
        if name.startswith("MEMORY_CHAIN_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _execute(name: str, workdir: Path, cell_timeout: int) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=cell_timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},  # cwd: no .env of the repository
    )
    client.execute()
    return notebook


@pytest.mark.parametrize(
    "name",
    [
        "quickstart.ipynb",
        "remote_client.ipynb",
        "latency_and_recall.ipynb",
        "agent_with_memory.ipynb",
        "import_history.ipynb",
    ],
)
def test_committed_without_outputs(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    assert any("assert " in cell.source for cell in code), "a notebook must check something"
    for cell in code:
        assert cell.outputs == [], f"{name}: clear the outputs before committing"
        assert cell.execution_count is None, f"{name}: clear the outputs before committing"


@pytest.mark.timeout(300)
def test_quickstart_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _clean_environment(monkeypatch)
    executed = _execute("quickstart.ipynb", tmp_path, cell_timeout=240)
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.output_type == "error"]
    assert any("TP1351" in output.get("text", "") for output in outputs)


@pytest.mark.timeout(300)
def test_import_history_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _clean_environment(monkeypatch)
    executed = _execute("import_history.ipynb", tmp_path, cell_timeout=240)
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.output_type == "error"]
    assert any("Casa do Rio Azul-58" in output.get("text", "") for output in outputs)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_remote_client_runs_against_a_real_server(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    start_server: Callable[..., RunningServer],
) -> None:
    server = start_server()
    _clean_environment(monkeypatch)
    monkeypatch.setenv("MEMORY_CHAIN_URL", server.url)
    executed = _execute("remote_client.ipynb", tmp_path, cell_timeout=600)
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.output_type == "error"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_agent_with_memory_runs_on_the_embedded_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """create_agent + MemoryMiddleware + MemoryStore on the embedded model: the notebook's
    asserts check a fact of one thread reaches another thread of the same user only."""
    _clean_environment(monkeypatch)
    # Nothing listens there: the services fall back to the embedded model, as on a machine
    # without Ollama.
    monkeypatch.setenv("MEMORY_CHAIN_OLLAMA_BASE_URL", "http://127.0.0.1:9")
    executed = _execute("agent_with_memory.ipynb", tmp_path, cell_timeout=600)
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.output_type == "error"]
    text = "".join(output.get("text", "") for output in outputs)
    assert "LLM: embedded" in text
    assert "[ana/ana-packing]" in text


LOCOMO_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"


@pytest.mark.timeout(600)
def test_latency_and_recall_notebook_plots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not LOCOMO_DEV.exists():
        missing(f"LoCoMo data not found at {LOCOMO_DEV}: CI runs next to ../shared/data")
    _clean_environment(monkeypatch)
    plot = tmp_path / "plot.png"
    monkeypatch.setenv("LOCOMO_FILE", str(LOCOMO_DEV))
    monkeypatch.setenv("LOCOMO_CONVERSATIONS", "1")
    monkeypatch.setenv("PLOT_PATH", str(plot))
    executed = _execute("latency_and_recall.ipynb", tmp_path, cell_timeout=480)
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.output_type == "error"]
    text = "".join(output.get("text", "") for output in outputs)
    assert "hybrid" in text
    assert "tier 1: recent turns" in text
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
