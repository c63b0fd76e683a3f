"""Runs a folder's model_raw.tflite in an environment with LiteRT and numpy only.

`python benchmarks/litert_run.py FOLDER ROWS_JSON LATENCY_RUNS` (with the LiteRT
environment's python; nothing of TensorFlow or of this repository is imported but
the folder's own predict.py). Prints one JSON object: the classes of every row, the
median batch-1 latency of the first row (inputs made from the row, then the call),
and the interpreter's module.
"""

import json
import statistics
import sys
import time


def main() -> None:
  folder, rows_path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
  try:
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
    sys.exit('tensorflow is importable in this environment; a device has no TensorFlow.')
  except ImportError:
    pass
  sys.path.insert(0, folder)
  import predict  # pylint: disable=g-import-not-at-top
  with open(rows_path) as handle:
    rows = json.load(handle)
  predictor = predict.load_raw_flatbuffer(folder)
  classes = predictor.predict_rows(rows)['classes']
  timings = []
  predictor.scores_one(predictor.row_inputs(rows[0]))
  for _ in range(runs):
    start = time.perf_counter()
    predictor.scores_one(predictor.row_inputs(rows[0]))
    timings.append(time.perf_counter() - start)
  print(json.dumps({'classes': classes.tolist(), 'latency_ms': 1000 * statistics.median(timings),
                    'interpreter': predict.interpreter_class().__module__}))


if __name__ == '__main__':
  main()
