"""Property tests of the construction-time validators: valid values pass, invalid ones fail.

Each test draws arbitrary values (numbers of every sign, booleans, strings, None) and
compares the validator's verdict with the rule as the component's docstring states it.
"""

import math

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from tfx_distillery.components.common import labels
from tfx_distillery.components.common import parameters
from tfx_distillery.components.common import reading
from tfx_distillery.components.distiller import training as distiller_training
from tfx_distillery.components.common import strategy as strategy_lib
from tfx_distillery.components.gate import component as gate_component
from tfx_distillery.components.pruner import component as pruner_component
from tfx_distillery.components.quantizer import component as quantizer_component
from tfx_distillery.components.quantizer import conversion

ANYTHING = st.one_of(st.none(), st.booleans(), st.integers(-10, 10),
                     st.floats(-3, 3), st.just(float("nan")), st.text(max_size=5))
NUMBERS = st.one_of(st.integers(-5, 5), st.floats(-2, 2, allow_nan=False), st.booleans())


def is_number(value):
  return isinstance(value, (int, float)) and not isinstance(value, bool) and not (
      isinstance(value, float) and math.isnan(value))


def accepted(check, *args, **kwargs):
  try:
    check(*args, **kwargs)
    return True
  except ValueError:
    return False


@settings(max_examples=200, deadline=None)
@given(temperature=st.one_of(NUMBERS, ANYTHING), alpha=st.one_of(NUMBERS, ANYTHING))
def test_distiller_temperature_and_alpha(temperature, alpha):
  valid = (is_number(temperature) and temperature > 0 and is_number(alpha)
           and 0 <= alpha <= 1)
  settings_ = distiller_training.DistillationSettings(temperature=temperature, alpha=alpha)
  assert accepted(distiller_training.validate, settings_, 1) == valid


@settings(max_examples=200, deadline=None)
@given(mixup=st.one_of(NUMBERS, ANYTHING, st.just(float('inf'))))
def test_distiller_mixup(mixup):
  valid = is_number(mixup) and 0 <= mixup < math.inf
  settings_ = distiller_training.DistillationSettings(mixup=mixup)
  assert accepted(distiller_training.validate, settings_, 1) == valid


@settings(max_examples=200, deadline=None)
@given(weights=st.lists(st.one_of(NUMBERS, ANYTHING), max_size=4),
       teachers=st.integers(1, 4))
def test_distiller_teacher_weights(weights, teachers):
  valid = (len(weights) == teachers and all(is_number(weight) and weight >= 0
                                            for weight in weights) and sum(
                                                weight for weight in weights) > 0)
  settings_ = distiller_training.DistillationSettings(teacher_weights=tuple(weights))
  assert accepted(distiller_training.validate, settings_, teachers) == valid


@settings(max_examples=200, deadline=None)
@given(strategy=st.sampled_from(strategy_lib.STRATEGIES + ('horovod',)),
       workers=st.one_of(st.integers(-2, 4), ANYTHING), servers=st.integers(-1, 3),
       communication=st.sampled_from(strategy_lib.COMMUNICATIONS + ('mpi',)))
def test_distribution_settings(strategy, workers, servers, communication):
  integer_workers = isinstance(workers, int) and not isinstance(workers, bool)
  valid = (strategy in strategy_lib.STRATEGIES and communication in strategy_lib.COMMUNICATIONS
           and integer_workers and workers >= 1 and servers >= 0
           and (servers >= 1) == (strategy == 'parameter_server')
           and not (strategy in ('one_device', 'mirrored', 'pipeline') and workers > 1)
           and not (strategy == 'mirrored' and communication == 'ring')
           and not (strategy != 'mirrored' and communication == 'reduce_to_one_device'))
  assert accepted(strategy_lib.validate, strategy, workers, servers, communication) == valid


@settings(max_examples=200, deadline=None)
@given(sparsity=st.one_of(NUMBERS, ANYTHING), m=st.integers(0, 5), n=st.integers(0, 5),
       use_m_by_n=st.booleans(), drop=st.one_of(st.none(), NUMBERS))
def test_pruner_sparsity_pattern_and_budget(sparsity, m, n, use_m_by_n, drop):
  m_by_n = (m, n) if use_m_by_n else None
  # None is the default: the Pruner then searches within a budget.
  valid = ((sparsity is None or (is_number(sparsity) and 0 < sparsity < 1))
           and (m_by_n is None or (m >= 1 and n >= 1 and m < n))
           and (drop is None or (is_number(drop) and 0 <= drop <= 1))
           and not (drop is not None and m_by_n is not None))
  assert accepted(pruner_component.validate, sparsity, 'polynomial', 0, None, None, m_by_n,
                  drop, (0.5, 0.9)) == valid


@settings(max_examples=200, deadline=None)
@given(mode=st.sampled_from(conversion.MODES + ('int4',)),
       io_type=st.sampled_from(conversion.IO_TYPES + ('uint8',)),
       samples=st.one_of(st.integers(-3, 300), ANYTHING), preserve=st.booleans())
def test_quantizer_modes_and_counts(mode, io_type, samples, preserve):
  valid = (mode in conversion.MODES and io_type in conversion.IO_TYPES
           and not (io_type == 'int8' and mode not in ('full_integer', 'qat'))
           and isinstance(samples, int) and not isinstance(samples, bool) and samples >= 1
           and not (preserve and mode != 'qat'))
  assert accepted(quantizer_component.validate, mode, io_type, samples, 10, preserve, 10,
                  10) == valid


@settings(max_examples=100, deadline=None)
@given(label_key=st.one_of(st.text(max_size=8), ANYTHING),
       num_classes=st.one_of(st.none(), st.integers(-3, 5), ANYTHING))
def test_label_key_and_num_classes(label_key, num_classes):
  valid = (isinstance(label_key, str) and label_key != ''
           and (num_classes is None or (isinstance(num_classes, int)
                                        and not isinstance(num_classes, bool)
                                        and num_classes >= 2)))
  assert accepted(lambda: (labels.validate_label_key(label_key),
                           labels.validate_num_classes(num_classes))) == valid


@settings(max_examples=100, deadline=None)
@given(drop=st.one_of(NUMBERS, ANYTHING), size=st.one_of(st.none(), st.integers(-5, 5),
                                                         st.booleans()))
def test_gate_thresholds(drop, size):
  from tfx import v1 as tfx  # pylint: disable=import-outside-toplevel
  channel = lambda: tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model)  # pylint: disable=unnecessary-lambda-assignment
  valid = (is_number(drop) and 0 <= drop <= 1
           and (size is None or (isinstance(size, int) and not isinstance(size, bool)
                                 and size >= 1)))
  assert accepted(gate_component.AccuracyGate,
                  examples=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Examples),
                  transform_graph=tfx.dsl.Channel(
                      type=tfx.types.standard_artifacts.TransformGraph),
                  baseline_model=channel(), candidate_models=[channel()],
                  max_accuracy_drop=drop, max_model_bytes=size) == valid


def is_count(value, smallest):
  return isinstance(value, int) and not isinstance(value, bool) and value >= smallest


@settings(max_examples=200, deadline=None)
@given(cycle_length=st.one_of(NUMBERS, ANYTHING), shuffle_buffer=st.one_of(NUMBERS, ANYTHING),
       cache=st.sampled_from(reading.CACHE_MODES + ('disk', '')),
       compression=st.sampled_from(reading.COMPRESSION_TYPES + ('SNAPPY',)))
def test_reading_options(cycle_length, shuffle_buffer, cache, compression, tmp_path_factory):
  cache_path = str(tmp_path_factory.getbasetemp() / 'cache' / 'part') if cache == 'file' else ''
  valid = (is_count(cycle_length, 1) and is_count(shuffle_buffer, 0)
           and cache in reading.CACHE_MODES and compression in reading.COMPRESSION_TYPES)
  assert accepted(reading.IngestionOptions, cycle_length=cycle_length,
                  shuffle_buffer=shuffle_buffer, cache=cache, cache_path=cache_path,
                  compression=compression) == valid


@settings(max_examples=100, deadline=None)
@given(num_shards=st.one_of(NUMBERS, ANYTHING))
def test_ingestion_transform_num_shards(num_shards):
  from tfx_distillery.components.ingest_transform import component as ingest_component  # pylint: disable=import-outside-toplevel
  from tfx_distillery.pipelines import datasets  # pylint: disable=import-outside-toplevel
  from tests import helpers  # pylint: disable=import-outside-toplevel
  from tfx.types import standard_artifacts  # pylint: disable=import-outside-toplevel
  assert accepted(ingest_component.IngestionTransform,
                  examples=helpers.channel(standard_artifacts.Examples),
                  schema=helpers.channel(standard_artifacts.Schema),
                  module_file=datasets.module_file('tabular_transform'),
                  num_shards=num_shards) == is_count(num_shards, 1)


# Names the check must refuse, and names it must accept, written out rather than
# derived from the check's own pattern. Random keys come from an alphabet that can
# spell no secret word, so each drawn config's verdict is known without the regex.
SECRET_NAMES = ('password', 'db_password', 'PASSWD', 'API_KEY', 'api-key', 'auth_token',
                'secret', 'client_secret', 'gcp_credentials', 'private_key', 'PrivateKey')
SAFE_NAMES = ('batch_size', 'epochs', 'label_column', 'seed', 'learning_rate',
              'keyboard', 'pass_rate', 'credit')
KEYS = st.one_of(st.sampled_from(SECRET_NAMES + SAFE_NAMES),
                 st.text(alphabet='0123456789_xyz', max_size=8))


@settings(max_examples=300, deadline=None)
@given(config=st.dictionaries(KEYS, st.one_of(ANYTHING, st.dictionaries(KEYS, ANYTHING,
                                                                         max_size=2)),
                              max_size=4))
def test_credentials_in_custom_config(config):
  def names(value):
    if isinstance(value, dict):
      for key, item in value.items():
        yield str(key)
        yield from names(item)

  looks_secret = any(name in SECRET_NAMES for name in names(config))
  assert accepted(parameters.refuse_secrets, 'custom_config', config) == (not looks_secret)
