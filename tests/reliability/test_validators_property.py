"""Property tests of the construction-time validators: valid values pass, invalid ones fail.

Each test draws arbitrary values (numbers of every sign, booleans, strings, None) and
compares the validator's verdict with the rule as the component's docstring states it.
"""

import math

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from components.distiller import training as distiller_training
from components.distributed_trainer import strategy as strategy_lib
from components.gate import component as gate_component
from components.pruner import component as pruner_component
from components.quantizer import component as quantizer_component
from components.quantizer import conversion

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
           and not (strategy in ('one_device', 'mirrored') and workers > 1))
  assert accepted(strategy_lib.validate, strategy, workers, servers, communication) == valid


@settings(max_examples=200, deadline=None)
@given(sparsity=st.one_of(NUMBERS, ANYTHING), m=st.integers(0, 5), n=st.integers(0, 5),
       use_m_by_n=st.booleans(), drop=st.one_of(st.none(), NUMBERS))
def test_pruner_sparsity_pattern_and_budget(sparsity, m, n, use_m_by_n, drop):
  m_by_n = (m, n) if use_m_by_n else None
  valid = (is_number(sparsity) and 0 < sparsity < 1
           and (m_by_n is None or (m >= 1 and n >= 1 and m < n))
           and (drop is None or (is_number(drop) and 0 <= drop < 1))
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
