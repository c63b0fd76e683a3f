"""A lost engine process ends the run: its main thread is interrupted wherever it waits, and
the process ends within the bound even if the thread never unwinds. In child processes that
start with SIGINT ignored, as a run started in the background does."""

import subprocess
import sys
import time

from tests import helpers

# The child: SIGINT ignored (a background job's), the handler a run sets, then a main
# thread in a system call while another thread reports the loss a second later.
CHILD = '''
import signal, subprocess, sys, threading, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
from tfx_distillery.pipelines import local_runner
local_runner.install_loss_handler()
threading.Timer(1.0, local_runner.end_run_after_loss,
                ('the local flink cluster lost its flink taskmanager 0', float(sys.argv[2]))).start()
started = time.monotonic()
if sys.argv[1] == 'unwinds':
  try:
    subprocess.run(['sleep', '60'], check=False)
  except BaseException as error:
    print(f'unwound after {time.monotonic() - started:.1f} s: {type(error).__name__}', flush=True)
    local_runner._failure_reported.set()
    sys.exit(1)
  print('the sleep ran to its end', flush=True)
else:
  while True:  # A stage that swallows every exception.
    try:
      time.sleep(60)
    except BaseException:
      pass
'''


def run_child(mode, bound_s):
  started = time.monotonic()
  completed = subprocess.run([sys.executable, '-c', CHILD, mode, str(bound_s)],
                             capture_output=True, text=True, timeout=90,
                             **helpers.child_process_options())
  return completed, time.monotonic() - started


def test_the_loss_interrupts_a_main_thread_in_a_system_call_with_sigint_ignored():
  completed, seconds = run_child('unwinds', 30)
  assert completed.returncode == 1, completed.stdout + completed.stderr
  assert 'unwound after' in completed.stdout and '_EngineProcessLost' in completed.stdout
  assert seconds < 20, seconds  # Not the sleep's 60 s, nor the bound's 30.


def test_a_main_thread_that_never_unwinds_ends_with_the_process_at_the_bound_naming_the_loss():
  completed, seconds = run_child('swallows', 3)
  assert completed.returncode == 1, completed.stdout + completed.stderr
  assert 'error: the pipeline failed: the local flink cluster lost its flink taskmanager 0' in (
      completed.stdout + completed.stderr)
  assert seconds < 20, seconds


# The child: a run's Ctrl-C handling around a main thread whose library swallows the
# KeyboardInterrupt (as pyarrow's first look for pandas does), then Ctrl-C a second later.
SWALLOWING_RUN = '''
import os, signal, sys, threading, time
from tfx_distillery.pipelines import local_runner

def run(unused_args):
  while True:  # A library that swallows every exception.
    try:
      time.sleep(60)
    except BaseException:
      pass

local_runner.run = run
threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
sys.exit(local_runner.run_with_exit_status(None))
'''


def test_control_c_that_a_library_swallows_still_ends_the_run_within_the_bound():
  started = time.monotonic()
  completed = subprocess.run([sys.executable, '-c', SWALLOWING_RUN], capture_output=True,
                             text=True, timeout=90, preexec_fn=helpers.answer_control_c,
                             **helpers.child_process_options())
  seconds = time.monotonic() - started
  assert completed.returncode == 130, completed.stdout + completed.stderr
  assert 'interrupted: nothing was pushed' in completed.stdout + completed.stderr
  assert seconds < 30, seconds
