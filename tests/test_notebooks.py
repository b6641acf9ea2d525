"""The notebooks, executed top to bottom in a real kernel against a temporary warehouse: no cell
may fail and every plot cell must draw. The quickstart builds the warehouse the other two read.
The three share one kernel, as a user's notebooks share one cluster, with the kernel's namespace
cleared before each: a kernel of their own each started a JVM of its own, about 3 CPU-minutes
of the suite apiece."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

from pipelines.session import INTERPRETED_QUERIES

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
WORKLOAD = {"TREES": 400, "SEED": 7}
# The kernel's session interprets its queries, as the suite's own do: the notebooks' batches
# hold a few hundred trees (settings the notebooks' builder leaves unset, through spark-submit).
KERNEL_ENV = {
    **os.environ,
    "PYSPARK_SUBMIT_ARGS": " ".join(f"--conf {k}={v}" for k, v in INTERPRETED_QUERIES.items())
    + " pyspark-shell",
}


def execute(kernel: KernelManager, name: str, **parameters: Any) -> Any:
    """Run ``notebooks/<name>.ipynb`` in ``kernel``, its namespace cleared first, with
    ``parameters`` injected after its parameters cell (as papermill does); raise on the first
    failing cell."""
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    tagged = [
        i for i, cell in enumerate(book.cells) if "parameters" in cell.metadata.get("tags", [])
    ]
    assert len(tagged) == 1, f"{name}.ipynb needs exactly one cell tagged 'parameters'"
    injected = new_code_cell("\n".join(f"{key} = {value!r}" for key, value in parameters.items()))
    injected.metadata["tags"] = ["injected-parameters"]
    book.cells.insert(tagged[0] + 1, injected)
    book.cells.insert(0, new_code_cell("%reset -f"))
    NotebookClient(
        book,
        km=kernel,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    ).execute(env=KERNEL_ENV)  # the environment of the kernel it starts, if none runs yet
    return book


def assert_every_plot_drawn(book: Any) -> None:
    plots = [cell for cell in book.cells if "plot" in cell.metadata.get("tags", [])]
    assert plots, "no cell is tagged 'plot'"
    for cell in plots:
        images = [out for out in cell.outputs if "image/png" in out.get("data", {})]
        assert images, f"this plot cell drew nothing:\n{cell.source}"


def printed(cell: Any) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


@pytest.mark.fast
def test_notebooks_are_committed_without_outputs() -> None:
    committed = [p for p in NOTEBOOKS.glob("*.ipynb") if not p.name.endswith(".executed.ipynb")]
    assert len(committed) == 3
    for path in sorted(committed):
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
        with_output = [c.source for c in book.cells if c.cell_type == "code" and c.outputs]
        assert with_output == [], f"{path.name} has saved outputs"


@pytest.fixture(scope="module")
def kernel() -> Iterator[KernelManager]:
    manager = KernelManager(kernel_name="python3")
    yield manager
    if manager.has_kernel:
        manager.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def warehouse(kernel: KernelManager, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("notebooks") / "warehouse")
    book = execute(kernel, "quickstart", WAREHOUSE=path, **WORKLOAD)
    assert_every_plot_drawn(book)
    return path


def test_quickstart_builds_a_warehouse_and_plots_outcomes(warehouse: str) -> None:
    assert (Path(warehouse) / "acker.db" / "completed" / "_delta_log").is_dir()


def test_investigate_tree_explains_a_timed_out_tree_with_its_lost_tuples(
    kernel: KernelManager, warehouse: str
) -> None:
    book = execute(kernel, "investigate_tree", WAREHOUSE=warehouse, ANCHOR_ID=None, **WORKLOAD)
    assert_every_plot_drawn(book)
    explanation = printed(book.cells[-1])
    assert explanation.startswith("expired: the checksum was still 0x"), explanation
    assert "never acked (lost" in explanation, explanation


def test_operations_dashboard_draws_every_panel(kernel: KernelManager, warehouse: str) -> None:
    assert_every_plot_drawn(execute(kernel, "operations", WAREHOUSE=warehouse))
