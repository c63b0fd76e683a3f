"""The local Flink/Spark cluster's refusals: engine, endpoint, Java, job server version."""

import os
import socket
import stat
import time

import pytest

from tfx_distillery.pipelines import beam_cluster
from tfx_distillery.pipelines import cli


def test_an_unknown_engine_is_refused_naming_the_ones_we_support(capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', '--dataset', 'taxi', '--beam-runner', 'dataflow'])
  assert exit_info.value.code == 2
  error = capsys.readouterr().err
  assert "--beam-runner: invalid choice: 'dataflow'" in error
  assert "'direct', 'flink', 'spark'" in error
  with pytest.raises(ValueError, match='--beam-runner must be one of flink, spark'):
    beam_cluster.check_engine('samza')


def test_an_endpoint_needs_an_engine_and_host_port(capsys):
  for arguments, message in (
      (['--beam-endpoint', 'localhost:8099'], 'give --beam-runner flink or spark with it'),
      (['--beam-runner', 'flink', '--beam-endpoint', 'localhost'], 'must be HOST:PORT')):
    with pytest.raises(SystemExit):
      cli.main(['run', '--dataset', 'taxi', *arguments])
    assert message in capsys.readouterr().err


def test_an_endpoint_that_does_not_answer_is_refused_within_the_bound_naming_it():
  with socket.socket() as handle:  # A port that nothing listens on once closed.
    handle.bind(('127.0.0.1', 0))
    port = handle.getsockname()[1]
  start = time.monotonic()
  with pytest.raises(beam_cluster.ClusterError,
                     match=f'--beam-endpoint 127.0.0.1:{port}: no job server answered within 2 s'):
    beam_cluster.check_endpoint(f'127.0.0.1:{port}', timeout_s=2)
  assert time.monotonic() - start < 10


def _fake_java(tmp_path, version_line: str) -> str:
  path = tmp_path / 'java'
  path.write_text(f'#!/bin/sh\necho \'{version_line}\' >&2\n')
  path.chmod(path.stat().st_mode | stat.S_IEXEC)
  return str(path)


@pytest.mark.parametrize('line, major', [('openjdk version "17.0.9" 2023-10-17', 17),
                                         ('java version "1.8.0_392"', 8),
                                         ('openjdk version "11.0.21" 2023-10-17', 11)])
def test_the_java_version_is_read_as_its_major(tmp_path, line, major):
  assert beam_cluster.java_major_version(_fake_java(tmp_path, line)) == major


def test_a_java_too_old_or_missing_is_refused_naming_what_is_needed(tmp_path):
  with pytest.raises(beam_cluster.ClusterError, match='Java 11 or newer is needed .* is Java 8'):
    beam_cluster.check_java(_fake_java(tmp_path, 'java version "1.8.0_392"'))
  with pytest.raises(beam_cluster.ClusterError, match='Java 11 or newer is needed .* could not '
                     'be run'):
    beam_cluster.check_java(str(tmp_path / 'no-java-here'))


def test_a_job_server_of_another_beam_version_is_refused_naming_both(tmp_path):
  lib = tmp_path / 'lib'
  lib.mkdir()
  (lib / 'beam-runners-flink-1.19-2.61.0.jar').write_bytes(b'')
  with pytest.raises(beam_cluster.ClusterError) as error:
    beam_cluster.check_job_server_version(str(lib), 'flink')
  assert 'job server is version 2.61.0' in str(error.value)
  assert f'the Beam SDK is {beam_cluster.beam_sdk_version()}' in str(error.value)
  (lib / 'beam-runners-flink-1.19-2.61.0.jar').rename(
      lib / f'beam-runners-flink-1.19-{beam_cluster.beam_sdk_version()}.jar')
  beam_cluster.check_job_server_version(str(lib), 'flink')


def test_the_portable_runner_runs_the_sdk_harness_in_the_stages_own_process():
  assert beam_cluster.portable_runner_args('flink', '127.0.0.1:8099') == [
      '--runner=PortableRunner', '--job_endpoint=127.0.0.1:8099',
      '--environment_type=LOOPBACK', '--parallelism=2']
