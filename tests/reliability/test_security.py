"""Security: no credential travels as an execution parameter, module files load only
from the path given, and the report escapes what comes from data."""

import sys

import pytest
from tfx.components.util import udf_utils
from tfx.types import standard_artifacts

from tfx_distillery import components
from tfx_distillery.components.common import modules
from tfx_distillery.components.common import parameters
from tfx_distillery.components.distiller import spec as distiller_spec
from tfx_distillery.components.distributed_trainer import spec as trainer_spec
from tfx_distillery.components.gate import report
from tfx_distillery.components.gate import spec as gate_spec
from tfx_distillery.components.ingest_transform import spec as ingest_spec
from tfx_distillery.components.pruner import spec as pruner_spec
from tfx_distillery.components.quantizer import spec as quantizer_spec
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import pipeline
from tests import helpers

OUR_SPECS = [distiller_spec.DistillerSpec, trainer_spec.DistributedTrainerSpec,
             gate_spec.AccuracyGateSpec, ingest_spec.IngestionTransformSpec,
             pruner_spec.PrunerSpec, quantizer_spec.QuantizerSpec]


@pytest.mark.parametrize('spec_class', OUR_SPECS, ids=lambda spec: spec.__name__)
def test_no_execution_parameter_of_ours_is_a_credential(spec_class):
  for name in spec_class.PARAMETERS:
    assert not parameters.SECRET_NAME.search(name), name


def examples():
  return helpers.channel(standard_artifacts.Examples)


def graph():
  return helpers.channel(standard_artifacts.TransformGraph)


CONSTRUCTORS = {
    'DistributedTrainer': lambda config: components.DistributedTrainer(
        examples=examples(), transform_graph=graph(),
        module_file=datasets.module_file('tabular_teacher'), custom_config=config),
    'Distiller': lambda config: components.Distiller(
        examples=examples(), transform_graph=graph(),
        teacher_model=helpers.channel(standard_artifacts.Model),
        module_file=datasets.module_file('tabular_student'), custom_config=config),
    'IngestionTransform': lambda config: components.IngestionTransform(
        examples=examples(), schema=helpers.channel(standard_artifacts.Schema),
        module_file=datasets.module_file('tabular_transform'), custom_config=config),
    'Pruner': lambda config: components.Pruner(
        model=helpers.channel(standard_artifacts.Model), examples=examples(),
        transform_graph=graph(), custom_config=config),
}


@pytest.mark.parametrize('component', sorted(CONSTRUCTORS))
def test_a_credential_in_custom_config_is_refused_at_construction(component):
  CONSTRUCTORS[component]({'batch_size': 32})  # An ordinary config passes.
  with pytest.raises(ValueError, match=r"custom_config\['db_password'\] looks like a credential"):
    CONSTRUCTORS[component]({'batch_size': 32, 'db_password': 'hunter2'})
  with pytest.raises(ValueError, match=r"custom_config\['store'\]\['api_key'\]"):
    CONSTRUCTORS[component]({'store': {'api_key': 'abc'}})


def test_a_credential_in_the_beam_arguments_is_refused_when_the_pipeline_is_built(tmp_path):
  arguments = helpers.taxi_pipeline_arguments(tmp_path)
  pipeline.create_pipeline(beam_pipeline_args=['--direct_num_workers=1'], **arguments)
  with pytest.raises(ValueError, match='--aws_secret_access_key=...'):
    pipeline.create_pipeline(beam_pipeline_args=['--aws_secret_access_key=xyz'], **arguments)


@pytest.fixture
def decoy_on_path(tmp_path, monkeypatch):
  """A `tabular_student` module, first on sys.path, that must never be the one loaded."""
  decoy_dir = tmp_path / 'decoy'
  decoy_dir.mkdir()
  (decoy_dir / 'tabular_student.py').write_text(
      'def build_student(*args):\n  raise RuntimeError("the decoy was loaded")\n')
  monkeypatch.syspath_prepend(str(decoy_dir))
  monkeypatch.delitem(sys.modules, 'tabular_student', raising=False)
  return str(decoy_dir)


def packaged_student(tmp_path):
  """The module_path a pipeline records: the module file's folder packaged as a wheel."""
  _, module_path = udf_utils.package_user_module_file(
      'Distiller', datasets.module_file('tabular_student'), str(tmp_path / 'root'))
  assert module_path.startswith('tabular_student@')
  return {'module_path': module_path}


def test_a_packaged_module_file_loads_from_its_wheel_not_a_same_named_module(tmp_path,
                                                                          decoy_on_path):
  exec_properties = packaged_student(tmp_path)
  with modules.user_module_first(exec_properties):
    build_student = udf_utils.get_fn(exec_properties, 'build_student')
  loaded_from = build_student.__code__.co_filename
  assert not loaded_from.startswith(decoy_on_path)
  with open(loaded_from) as loaded, open(datasets.module_file('tabular_student')) as given:
    assert loaded.read() == given.read()
  assert sys.path[0] == decoy_on_path  # The context put sys.path back.


def test_without_it_tfx_would_load_the_same_named_module(tmp_path, decoy_on_path):
  """Why `user_module_first` exists: TFX appends the wheel to sys.path."""
  build_student = udf_utils.get_fn(packaged_student(tmp_path), 'build_student')
  assert build_student.__code__.co_filename.startswith(decoy_on_path)


@pytest.mark.parametrize('component', ['DistributedTrainer', 'Distiller', 'IngestionTransform'])
def test_a_module_file_that_is_not_there_is_refused_at_construction(component, monkeypatch):
  monkeypatch.setattr(datasets, 'module_file', lambda name: f'/nowhere/{name}.py')
  with pytest.raises(ValueError, match=r"module_file '/nowhere/.*\.py' does not exist"):
    CONSTRUCTORS[component]({})


def test_the_report_escapes_everything_that_comes_from_data():
  hostile = '<script>alert(1)</script>'
  teacher = {'format': 'SavedModel', 'accuracy': 0.9, 'size_bytes': 1000, 'latency_ms': 1.0}
  candidate = {'name': hostile, 'format': f'tflite {hostile}', 'accuracy': 0.89,
               'accuracy_drop': 0.01, 'size_bytes': 100, 'latency_ms': 0.5, 'passed': True,
               'reasons': [f'column {hostile} was odd']}
  decision = {'blessed': True, 'chosen': hostile, 'teacher': teacher, 'candidates': [candidate],
              'max_accuracy_drop': 0.01, 'max_model_bytes': None, 'eval_examples': 10,
              'majority_accuracy': 0.5}
  page = report.render_html(decision, f'/serving/{hostile}')
  assert '<script' not in page
  assert page.count('&lt;script&gt;alert(1)&lt;/script&gt;') == 5
