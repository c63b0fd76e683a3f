"""What a TFLite conversion and a worker's start-up cost, before and after the speed-ups.

Not a benchmark: a timing the next session can re-run on any Keras SavedModel folder (a
Distiller's or a DistributedTrainer's `Format-Serving`).

  convert FOLDER...  each quantization mode, once through `TFLiteConverter.from_keras_model`
                     (the converter's own route, which saves the model with Keras' trace
                     of every layer's call on every conversion) and once through
                     `conversion.convert` (saved once, without those traces). Prints the
                     seconds of each, the two files' sizes and whether their tensors and
                     outputs on a few rows agree.
  imports            seconds for a fresh process to load what a trainer worker loads, and
                     to load `tfx_distillery.load_tflite`.

Usage:
  TF_USE_LEGACY_KERAS=1 python -m experiments.conversion_time convert FOLDER...
  TF_USE_LEGACY_KERAS=1 python -m experiments.conversion_time imports
"""

import os
import subprocess
import sys
import time

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

MODES = ((None, False), ('dynamic_range', False), ('full_integer', False), ('full_integer', True))
ROWS = 16


def _refuse(model, directory):
  raise NotImplementedError('timing the converter\'s own route')


def convert(folders) -> None:
  """Times each mode both ways on each folder's model."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.common import shapes  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.quantizer import conversion  # pylint: disable=g-import-not-at-top

  def rows_for(model):
    specs = shapes.keras_specs(model)

    def rows():
      random = np.random.default_rng(0)  # The same rows for both routes.
      for _ in range(ROWS):
        yield {name: (random.normal(size=[1] + [size or 1 for size in spec.shape[1:]])
                      .astype(spec.dtype) if 'float' in spec.dtype else
                      np.zeros([1] + [size or 1 for size in spec.shape[1:]], spec.dtype))
               for name, spec in specs.items()}
    return rows

  def described(content, rows):
    interpreter = tf.lite.Interpreter(model_content=content)
    runner = interpreter.get_signature_runner()
    return ([(detail['name'], detail['shape'].tolist(), str(detail['dtype']))
             for detail in interpreter.get_tensor_details()],
            [[np.asarray(value).tolist() for value in runner(**row).values()]
             for row in rows()])

  save = conversion._save_for_conversion  # pylint: disable=protected-access
  print('model | mode | converter\'s own route s | ours s | bytes (own, ours) | '
        'same tensors | same outputs')
  for folder in folders:
    model = tf_keras.models.load_model(folder, compile=False)
    rows = rows_for(model)
    for mode, sparse in MODES:
      seconds, contents = {}, {}
      for route, saving in (('own', _refuse), ('ours', save)):
        conversion._save_for_conversion = saving  # pylint: disable=protected-access
        conversion._float_conversions.clear()  # pylint: disable=protected-access
        start = time.perf_counter()
        contents[route] = conversion.convert(
            model, mode, rows if mode == 'full_integer' else None, sparse=sparse)
        seconds[route] = time.perf_counter() - start
      conversion._save_for_conversion = save  # pylint: disable=protected-access
      own, ours = described(contents['own'], rows), described(contents['ours'], rows)
      # Constants may be numbered in another order: compare the tensors as a set.
      print(f'{folder} | {mode or "float32"}{" sparse" if sparse else ""} | '
            f'{seconds["own"]:.1f} | {seconds["ours"]:.1f} | '
            f'{len(contents["own"])}, {len(contents["ours"])} | '
            f'{sorted(map(str, own[0])) == sorted(map(str, ours[0]))} | {own[1] == ours[1]}',
            flush=True)


def imports() -> None:
  """Seconds to load a worker's modules, and `load_tflite`, in fresh processes."""
  for name, code in (
      ('a trainer worker', 'import tfx_distillery.components.distributed_trainer.worker\n'
                           'import tfx.components.trainer.executor, tensorflow_transform'),
      ('load_tflite', 'from tfx_distillery import load_tflite')):
    start = time.perf_counter()
    subprocess.run([sys.executable, '-c', code], check=True, capture_output=True)
    print(f'{name}: {time.perf_counter() - start:.1f} s')


def main() -> None:
  if sys.argv[1:2] == ['convert'] and sys.argv[2:]:
    convert(sys.argv[2:])
  elif sys.argv[1:] == ['imports']:
    imports()
  else:
    sys.exit(__doc__)


if __name__ == '__main__':
  main()
