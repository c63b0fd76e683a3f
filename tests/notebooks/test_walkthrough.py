"""The walkthrough notebook runs headless under nbclient, and ML Metadata shows it ran."""

import os

import nbclient
import nbformat
from ml_metadata.proto import metadata_store_pb2

from tests import helpers

NOTEBOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'notebooks', 'walkthrough.ipynb')
COMPONENTS = {'CsvExampleGen', 'StatisticsGen', 'SchemaGen', 'IngestionTransform',
              'DistributedTrainer', 'Distiller', 'Pruner', 'Quantizer', 'AccuracyGate',
              'AtomicPusher'}


def test_the_notebook_is_committed_with_outputs_cleared():
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  for cell in notebook.cells:
    if cell.cell_type == 'code':
      assert not cell.outputs and cell.execution_count is None


def test_every_cell_runs_and_every_component_executed(tmp_path, monkeypatch):
  monkeypatch.setenv('DISTILLERY_NOTEBOOK_ROOT', str(tmp_path))
  monkeypatch.setenv('DISTILLERY_NOTEBOOK_STEPS', '20')
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  nbclient.NotebookClient(notebook, timeout=900, kernel_name='python3',
                          resources={'metadata': {'path': os.path.dirname(NOTEBOOK)}}).execute()
  by_node = helpers.executions_by_node(str(tmp_path / 'metadata.sqlite'))
  assert set(by_node) == COMPONENTS
  for node, executions in by_node.items():
    assert [execution.last_known_state for execution in executions] == [
        metadata_store_pb2.Execution.COMPLETE], node
  # The last cell showed the gate's plot.
  assert any(output.get('output_type') == 'display_data' and 'image/png' in output.get('data', {})
             for output in notebook.cells[-1].outputs)
