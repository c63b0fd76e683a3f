"""AtomicPusher: the stock Pusher, writing each version to a staging folder first."""

from tfx.components import Pusher
from tfx.dsl.components.base import executor_spec

from tfx_distillery.components.pusher import executor


class AtomicPusher(Pusher):
  """Pushes a blessed model so that a model server never sees half of it.

  TFX's Pusher copies the model file by file straight into
  `<base_directory>/<version>`, so a process killed mid-copy leaves a version
  folder that a model server polling the base directory tries to load. This
  drop-in takes the same arguments; for a filesystem destination it lets the stock
  executor copy into `<base_directory>/.incomplete/push-<pid>/<version>` (a name no
  model server reads as a version) and then renames the finished folder to
  `<base_directory>/<version>` in one step. Staging folders left by killed pushes
  are removed by the next push.

  Example:

    pusher = AtomicPusher(
        model=gate.outputs['model'],
        model_blessing=gate.outputs['blessing'],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_dir)))
  """

  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)
