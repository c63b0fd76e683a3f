"""Beam's DirectRunner, kept off Prism, for every Beam stage we start.

Beam's DirectRunner may hand a batch pipeline to Prism: a Go runner that it downloads at
run time. Beam 2.74 tried Prism first for every batch pipeline: offline that failed after
0.3 to 2.5 s per pipeline (about 8 s per whole run) before Beam fell back to its
FnApiRunner, and online it fetched the binary and ran TFX's stages on a runner TFX 1.16 was
not tested against. Beam skips Prism in a notebook, and this runner sets the notebook's
flag, so that a run takes the same path in the notebook, the CLI and the tests. Beam 2.62,
our pin, goes to its FnApiRunner first and to Prism only with a pipeline the FnApiRunner
cannot run (streaming, real-time timers), which no TFX stage is; it does not read the flag.
A runner the user names is kept.

The class keeps Beam's name, SwitchingDirectRunner: Beam's `Pipeline.run` skips a round
trip of the whole pipeline through its runner API, with stand-in coders, only for a
runner of that class name. Named DirectRunner, ours paid that trip: StatisticsGen's Beam
job on the taxi data took 22.6 s against 8.5 s, and `make demo` about 15% longer.

TFX packs its own installation into a `tfx_ephemeral` sdist for a Beam stage's workers
whenever the stage has Beam arguments and none of them ships code. For this runner, which
runs in this process or starts this interpreter again, nobody installs that package: it
cost a `setup.py sdist` of about 2 s and a 49 MB copy of TFX left in the temporary folder,
for every Beam stage of every run. Nor does anyone on Flink or Spark with the portable
runner's LOOPBACK environment, where the SDK harness is the stage's own process; there the
package was also staged to the job server, 49 MB per stage. Importing this module skips it
for these two only: a harness elsewhere (EXTERNAL, DOCKER, PROCESS) still gets it.
"""

import functools
from typing import List, Optional, Sequence

from apache_beam.runners.direct import direct_runner
from tfx.utils import dependency_utils

RUNNER_PATH = 'tfx_distillery.components.common.beam_runner.SwitchingDirectRunner'
RUNNER_ARGUMENT = f'--runner={RUNNER_PATH}'


class SwitchingDirectRunner(direct_runner.SwitchingDirectRunner):
  """Beam's DirectRunner, which goes to the FnApiRunner as it does in a notebook.

  Beam reads the class name (`apache_beam/pipeline.py`, `Pipeline.run`): keep it.
  """

  # The flag Beam's notebook path sets; the runner reads it only to decide on Prism.
  _is_interactive = True


def runner_name(beam_pipeline_args: Sequence[str]) -> Optional[str]:
  """The runner the arguments name (`--runner=X` or `--runner X`), or None."""
  return option_value(beam_pipeline_args, 'runner')


def with_direct_runner(beam_pipeline_args: Sequence[str]) -> List[str]:
  """The arguments with this DirectRunner first, unless they already name a runner.

  Args:
    beam_pipeline_args: A pipeline's or a component's Beam arguments.

  Returns:
    A new list: the arguments as given, after `RUNNER_ARGUMENT` when no `--runner` is there.
  """
  if runner_name(beam_pipeline_args) is not None:
    return list(beam_pipeline_args)
  return [RUNNER_ARGUMENT, *beam_pipeline_args]


def option_value(beam_pipeline_args: Sequence[str], name: str) -> Optional[str]:
  """The value of Beam option `name` (`--name=X` or `--name X`), or None."""
  flag = f'--{name}'
  for position, argument in enumerate(beam_pipeline_args):
    if not isinstance(argument, str):  # A placeholder TFX resolves at run time.
      continue
    if argument.startswith(flag + '='):
      return argument.split('=', 1)[1]
    if argument == flag and position + 1 < len(beam_pipeline_args):
      next_argument = beam_pipeline_args[position + 1]
      return next_argument if isinstance(next_argument, str) else None
  return None


def harness_is_this_process(beam_pipeline_args: Sequence[str]) -> bool:
  """Whether the stage's SDK harness runs in the stage's own process (or its interpreter
  started again): this DirectRunner, or the portable runner's LOOPBACK environment."""
  runner = runner_name(beam_pipeline_args)
  if runner == RUNNER_PATH:
    return True
  return (runner == 'PortableRunner'
          and option_value(beam_pipeline_args, 'environment_type') == 'LOOPBACK')


def _skip_the_package_for_this_runner(make_beam_dependency_flags):
  """TFX's `make_beam_dependency_flags`, except where the harness is this process."""
  if getattr(make_beam_dependency_flags, 'skips_this_runner', False):
    return make_beam_dependency_flags  # Imported again (a reload): wrap once.

  @functools.wraps(make_beam_dependency_flags)
  def dependency_flags(beam_pipeline_args):
    if harness_is_this_process(beam_pipeline_args):
      return list(beam_pipeline_args)
    return make_beam_dependency_flags(beam_pipeline_args)

  dependency_flags.skips_this_runner = True
  return dependency_flags


# TFX's Beam executors look the function up on the module when they start, so this
# reaches stock components (CsvExampleGen, StatisticsGen) as well as ours.
dependency_utils.make_beam_dependency_flags = _skip_the_package_for_this_runner(
    dependency_utils.make_beam_dependency_flags)
