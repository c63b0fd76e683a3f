"""Layer-by-layer sensitivity: what pruning each layer alone costs on eval, and who gets what.

Accuracy-aware pruning tools (NNCF, Intel Neural Compressor) first measure how much
each layer's accuracy suffers when it alone is pruned, then prune the tolerant
layers hardest. Here:
- `measure` zeroes each prunable layer's smallest weights alone, at each level of a
  grid, with no fine-tuning, and records the eval accuracy lost (one-shot loss);
- `allocate` reaches an overall sparsity by taking (layer, level) steps in order of
  rising one-shot loss, so a layer that breaks the model (a small vocabulary's
  embedding, the output layer) is the last to be pruned, and only as far as it must;
- a layer may never go to a level whose one-shot loss exceeds the allowance.
"""

from typing import Callable, Dict, Optional, Sequence

import numpy as np


def one_shot(values: np.ndarray, sparsity: float) -> np.ndarray:
  """`values` with its `sparsity` share of smallest magnitudes set to zero (tfmot's rule)."""
  count = int(round(sparsity * values.size))
  if count <= 0:
    return values
  order = np.argsort(np.abs(values), axis=None, kind='stable')
  pruned = values.copy().reshape(-1)
  pruned[order[:count]] = 0
  return pruned.reshape(values.shape)


def measure(weights: Dict[str, object], levels: Sequence[float],
            accuracy: Callable[[], float], dense_accuracy: float
            ) -> Dict[str, Dict[float, float]]:
  """One-shot loss of each layer pruned alone at each level.

  Args:
    weights: {layer name: its pruned weight variable (kernel or embeddings)}.
    levels: Sparsities tried, rising.
    accuracy: Scores the model as its variables stand (on eval).
    dense_accuracy: The unpruned model's score.

  Returns:
    {layer: {level: dense accuracy - accuracy with that layer alone pruned}}; every
    variable holds its original values again on return.
  """
  losses = {}
  for name, variable in weights.items():
    original = variable.numpy()
    losses[name] = {}
    try:
      for level in levels:
        variable.assign(one_shot(original, level))
        losses[name][level] = float(dense_accuracy - accuracy())
    finally:
      variable.assign(original)
  return losses


def cumulative(losses: Dict[float, float]) -> Dict[float, float]:
  """The worst loss at or below each level: what allowing that level costs.

  A level is allowed only if every lower one is, so a layer's target never jumps over a
  level that broke the model.
  """
  worst, result = float('-inf'), {}
  for level in sorted(losses):
    worst = max(worst, losses[level])
    result[level] = worst
  return result


def allocate(losses: Dict[str, Dict[float, float]], sizes: Dict[str, int], overall: float,
             allowance: float) -> Dict[str, float]:
  """Per-layer sparsities that remove `overall` of the prunable weights, tolerant layers first.

  (layer, level) steps are taken in order of rising cumulative one-shot loss (ties:
  the lower level, then the larger layer), until the weights removed reach
  `overall` of all prunable weights, or no allowed step is left.

  Args:
    losses: `measure`'s table.
    sizes: Weights in each layer's pruned variable.
    overall: The share of all prunable weights to remove.
    allowance: The largest cumulative one-shot loss a layer may have at its level.

  Returns:
    {layer: sparsity} for every layer in `losses` (0.0 for those left dense).
  """
  targets = {name: 0.0 for name in losses}
  steps = sorted(((loss, level, -sizes[name], name)
                  for name, by_level in losses.items()
                  for level, loss in cumulative(by_level).items() if loss <= allowance))
  for _, level, _, name in steps:
    if removed_share(targets, sizes) >= overall - 1e-9:
      break
    targets[name] = max(targets[name], level)
  return targets


def removed_share(targets: Dict[str, float], sizes: Dict[str, int]) -> float:
  """The share of all prunable weights that `targets` removes."""
  total = sum(sizes.values())
  return sum(targets[name] * sizes[name] for name in targets) / max(1, total)


def nothing_prunable_message(losses: Dict[str, Dict[float, float]], allowance: float,
                             levels: Optional[Sequence[float]] = None) -> str:
  """Names every layer and its one-shot losses, for a model left dense."""
  parts = []
  for name, by_level in losses.items():
    shown = ', '.join(f'{level:g}: {loss:+.4f}' for level, loss in sorted(by_level.items())
                      if levels is None or level in levels)
    parts.append(f'{name} ({shown})')
  return (f'no layer can be pruned within the per-layer allowance of {allowance:.4f} eval '
          f'accuracy (one-shot loss of each layer pruned alone, by sparsity): '
          f'{"; ".join(parts)}')
