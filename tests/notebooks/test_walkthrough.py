"""The walkthrough notebook runs headless under nbclient, and ML Metadata shows it ran."""

import os

import nbclient
import nbformat
from ml_metadata.proto import metadata_store_pb2
import pytest

from tests import helpers

# Long: the notebook runs the whole chain (make test-e2e).
pytestmark = pytest.mark.e2e

NOTEBOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'notebooks', 'walkthrough.ipynb')
COMPONENTS = {'CsvExampleGen', 'StatisticsGen', 'ImportSchemaGen', 'StrictExampleValidator',
              'IngestionTransform', 'DistributedTrainer', 'Distiller', 'Pruner',
              'Quantizer_student_full_integer', 'Quantizer_pruned_full_integer',
              'AccuracyGate', 'AtomicPusher'}


def cell_outputs(notebook, text):
  """The outputs of the code cell whose source contains `text`."""
  [cell] = [cell for cell in notebook.cells
            if cell.cell_type == 'code' and text in cell.source]
  return cell.outputs


def shows(outputs, mime_type):
  return any(mime_type in output.get('data', {}) for output in outputs
             if output.get('output_type') in ('display_data', 'execute_result'))


def test_the_notebook_is_committed_with_outputs_cleared():
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  for cell in notebook.cells:
    if cell.cell_type == 'code':
      assert not cell.outputs and cell.execution_count is None


def test_every_cell_runs_and_every_component_executed(tmp_path, monkeypatch, mnist1d_draw_cache):
  monkeypatch.setenv('DISTILLERY_NOTEBOOK_ROOT', str(tmp_path))
  monkeypatch.setenv('DISTILLERY_NOTEBOOK_STEPS', '20')
  monkeypatch.setenv('DISTILLERY_NOTEBOOK_POOL_ROWS', '500')
  monkeypatch.setenv('DISTILLERY_CACHE', str(mnist1d_draw_cache))
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  nbclient.NotebookClient(notebook, timeout=900, kernel_name='python3',
                          resources={'metadata': {'path': os.path.dirname(NOTEBOOK)}}).execute()
  by_node = helpers.executions_by_node(str(tmp_path / 'metadata.sqlite'))
  assert set(by_node) == COMPONENTS
  for node, executions in by_node.items():
    assert [execution.last_known_state for execution in executions] == [
        metadata_store_pb2.Execution.COMPLETE], node
  # What a TFX user should see inline: the data statistics, the teacher's and the student's
  # training curves, the gate's table and the report's plot.
  assert shows(cell_outputs(notebook, "context.show(component['StatisticsGen']"), 'text/html')
  assert shows(cell_outputs(notebook, "plot_curves(component['DistributedTrainer']"),
               'image/png')
  assert shows(cell_outputs(notebook, "plot_curves(component['Distiller']"), 'image/png')
  table = ''.join(output.get('text', '') for output in cell_outputs(notebook, 'format_table'))
  assert 'test accuracy' in table and 'teacher' in table and 'pruned_full_integer' in table
  assert shows(cell_outputs(notebook, 'report.png'), 'image/png')
  # MNIST-1D's chain, as far as the Distiller, with its pool as the transfer set.
  mnist1d = helpers.executions_by_node(str(tmp_path / 'mnist1d' / 'metadata.sqlite'))
  assert {'UnlabelledExampleGen', 'Distiller'} <= set(mnist1d)
  assert [execution.last_known_state for execution in mnist1d['Distiller']] == [
      metadata_store_pb2.Execution.COMPLETE]
  shown = ''.join(output.get('data', {}).get('text/plain', '')
                  for output in cell_outputs(notebook, 'with_pool = read_metrics'))
  assert "'transfer_set'" in shown and 'UnlabelledExampleGen' in shown


def test_the_notebook_builds_its_components_with_create_components():
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  source = '\n'.join(cell.source for cell in notebook.cells if cell.cell_type == 'code')
  assert 'create_components(' in source
  # No component is constructed by hand, so the notebook can not drift from the pipeline.
  for name in ('CsvExampleGen(', 'Distiller(', 'Pruner(', 'Quantizer(', 'AccuracyGate('):
    assert name not in source, name
