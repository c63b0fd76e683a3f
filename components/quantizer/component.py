"""Quantizer: a trained Keras model in, a TFLite model (really int8 if asked) out."""

from typing import Optional

from tfx import types
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_artifacts

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import seeding
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import executor
from tfx_distillery.components.quantizer import spec as quantizer_spec


def _check_count(name: str, value, minimum: int) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise ValueError(f'{name} must be an integer >= {minimum}; got {value!r}.')


def validate(mode: str, io_type: str, representative_samples: int, qat_steps: int,
             preserve_sparsity: bool, eval_examples: int, latency_runs: int) -> None:
  """Raises ValueError naming the first argument that is not allowed."""
  if mode not in conversion.MODES:
    raise ValueError(f'mode must be one of {", ".join(conversion.MODES)}; got {mode!r}.')
  if io_type not in conversion.IO_TYPES:
    raise ValueError(f'io_type must be one of {", ".join(conversion.IO_TYPES)}; got '
                     f'{io_type!r}.')
  if io_type == 'int8' and mode not in ('full_integer', 'qat'):
    raise ValueError(f"io_type 'int8' needs mode 'full_integer' or 'qat'; got mode {mode!r}.")
  _check_count('representative_samples', representative_samples, 1)
  _check_count('qat_steps', qat_steps, 1)
  _check_count('eval_examples', eval_examples, 1)
  _check_count('latency_runs', latency_runs, 1)
  if not isinstance(preserve_sparsity, bool):
    raise ValueError(f'preserve_sparsity must be True or False; got {preserve_sparsity!r}.')
  if preserve_sparsity and mode != 'qat':
    raise ValueError(f"preserve_sparsity=True needs mode 'qat' (pruning-preserving QAT); got "
                     f'mode {mode!r}.')


class Quantizer(base_component.BaseComponent):
  """Converts a model to TFLite and measures it against the input model.

  Modes: `dynamic_range` (int8 weights), `float16`, `full_integer` (int8 weights
  and activations, calibrated on `representative_samples` training examples;
  int8 or float inputs/outputs by `io_type`) and `qat` (tfmot quantization-aware
  fine-tuning for `qat_steps`, then full integer). In the full integer modes an
  op with no int8 kernel stays in float inside the model (named in the metrics
  with the int8 share of weights) unless `strict_int8` refuses it; a model
  with no int8 tensor is never written. The `quantized_model` output is one
  self-contained folder: the flatbuffer `tflite`, `transform_graph/` (a copy of the
  transform), `serving.json` (label column, output kind, format) and
  `predict.py` (`TFLitePredictor`, which serves raw tf.Examples); it carries
  the custom properties `model_format: tflite` and `quantization: <mode>`. The metrics
  artifact holds size, accuracy on the eval split through the TFLite
  interpreter and median batch-1 latency, for the result, the float32 TFLite
  conversion and the input model.

  Given `raw_examples` (ExampleGen's output), the folder also holds
  `model_raw.tflite`: the transform and the model in one flatbuffer whose inputs
  are the raw columns, which runs with LiteRT and numpy alone (no TensorFlow).
  A transform op with no TFLite builtin is named in `serving.json`
  (`raw_model_refused`), and the folder route serves alone. A pruned model is
  also converted with TFLite's sparse weight encoding (`sparse_encoding='auto'`),
  kept only where the file is smaller and its classes agree with the dense one.

  Example:

    quantizer = Quantizer(model=distiller.outputs['model'],
                          examples=transform.outputs['transformed_examples'],
                          transform_graph=transform.outputs['transform_graph'],
                          raw_examples=example_gen.outputs['examples'],
                          mode='full_integer', io_type='int8',
                          label_key='tips_xf', label_column='tips')
  """

  SPEC_CLASS = quantizer_spec.QuantizerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self,
               model: types.BaseChannel,
               examples: types.BaseChannel,
               transform_graph: types.BaseChannel,
               mode: str = 'full_integer',
               io_type: str = 'float32',
               representative_samples: int = 200,
               qat_steps: int = 200,
               preserve_sparsity: bool = False,
               label_column: str = 'label',
               label_key: str = 'label',
               strict_int8: bool = False,
               eval_examples: int = 2000,
               latency_runs: int = 300,
               raw_examples: Optional[types.BaseChannel] = None,
               sparse_encoding: str = 'auto',
               skip_not_a_candidate: bool = False,
               max_accuracy_drop: Optional[float] = 0.005,
               random_seed: Optional[int] = None):
    """Constructs a Quantizer.

    Args:
      model: Model channel of a Keras SavedModel over transformed features
        (DistributedTrainer, Distiller or Pruner output).
      examples: Transformed examples: calibration from `train`, figures from `eval`.
      transform_graph: The transform graph, referenced for serving raw examples.
      mode: `dynamic_range`, `float16`, `full_integer` or `qat`.
      io_type: `float32` or `int8` model inputs and outputs (full integer modes).
      representative_samples: Training examples used for calibration (>= 1).
      qat_steps: Fine-tuning steps for `qat` (>= 1).
      preserve_sparsity: With `qat`, keep a pruned model's zeros (tfmot's
        pruning-preserving quantization scheme).
      label_column: Raw label column, absent from serving requests.
      label_key: The transformed label feature (TFMA's name).
      strict_int8: In the full integer modes, refuse a model with an op that has
        no int8 kernel (naming it) instead of keeping that op in float.
      eval_examples: At most this many eval examples are scored (>= 1).
      latency_runs: Batch-1 calls timed for each median latency (>= 1).
      raw_examples: ExampleGen's raw examples. With them the Quantizer also writes
        `model_raw.tflite` (raw columns in, transform inside), calibrated on raw
        training rows and checked against the folder route on `eval`.
      sparse_encoding: `auto`: convert a model with zero weights (a Pruner's) also
        with TFLite's sparse encoding, and keep it where the file is smaller and
        its classes agree with the dense file's on eval; `never`: dense only.
      skip_not_a_candidate: When the Pruner marked its output as no gate
        candidate (pruning did not pay: its input handed on unchanged, or a file
        no smaller), convert nothing and mark this output too, so the gate leaves
        it out. For a chain that already quantizes the Pruner's input, as
        `create_pipeline` does; without it, the input is converted as usual.
      max_accuracy_drop: In the full integer modes, the largest eval accuracy
        drop of the int8 model against the float32 TFLite conversion of the
        same model, as a fraction (0.005 is half a point). Past it the Quantizer
        recovers before it gives up: it keeps the layers whose int8 error costs
        the most at the output (`conversion.layer_errors`) in float, fewest first, then tries
        QAT fine-tuning (`full_integer` mode), and ships the smallest variant
        within it (else the most accurate). None: no recovery.
      random_seed: Seeds QAT's fine-tuning and any other draw, with op determinism
        on: the same seed gives the same flatbuffer. None draws a seed, used
        without op determinism; `metrics.json` and ML Metadata record it.

    Raises:
      ValueError: naming the argument that is not allowed.
    """
    validate(mode, io_type, representative_samples, qat_steps, preserve_sparsity,
             eval_examples, latency_runs)
    labels.validate_label_key(label_key)
    seeding.validate(random_seed)
    if not isinstance(strict_int8, bool):
      raise ValueError(f'strict_int8 must be True or False; got {strict_int8!r}.')
    if sparse_encoding not in quantizer_spec.SPARSE_ENCODINGS:
      raise ValueError(f'sparse_encoding must be one of '
                       f'{", ".join(quantizer_spec.SPARSE_ENCODINGS)}; got {sparse_encoding!r}.')
    if not isinstance(skip_not_a_candidate, bool):
      raise ValueError('skip_not_a_candidate must be True or False; got '
                       f'{skip_not_a_candidate!r}.')
    if max_accuracy_drop is not None and (
        not isinstance(max_accuracy_drop, (int, float)) or isinstance(max_accuracy_drop, bool)
        or not 0.0 <= max_accuracy_drop <= 1.0):
      raise ValueError('max_accuracy_drop must be a fraction in [0, 1] (0.005 is half a point) '
                       f'or None for no recovery; got {max_accuracy_drop!r}.')
    super().__init__(spec=quantizer_spec.QuantizerSpec(
        model=model, examples=examples, transform_graph=transform_graph, mode=mode,
        io_type=io_type, representative_samples=representative_samples, qat_steps=qat_steps,
        preserve_sparsity=int(preserve_sparsity), eval_examples=eval_examples,
        latency_runs=latency_runs, label_column=label_column, label_key=label_key,
        strict_int8=int(strict_int8), raw_examples=raw_examples,
        sparse_encoding=sparse_encoding, skip_not_a_candidate=int(skip_not_a_candidate),
        max_accuracy_drop=-1.0 if max_accuracy_drop is None else float(max_accuracy_drop),
        random_seed=random_seed,
        quantized_model=types.Channel(type=standard_artifacts.Model),
        metrics=types.Channel(type=artifacts.ModelMetrics)))
