"""create_components(input_splits=...): a dataset's own split folders, as TFX's input_config."""

import json

import pytest

from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import pipeline

ARGUMENTS = dict(data_root='data', transform_module_file=datasets.module_file('mnist1d_transform'),
                 teacher_module_file=datasets.module_file('mnist1d_teacher'),
                 label_column='label', serving_model_dir='serving')


def example_gen_of(**arguments):
  [example_gen] = [component for component in pipeline.create_components(**ARGUMENTS,
                                                                          **arguments)
                   if component.id == 'CsvExampleGen']
  return example_gen.exec_properties


def test_split_folders_become_the_splits_and_no_hash_split_is_made():
  properties = example_gen_of(input_splits=('train', 'eval', 'test'))
  splits = json.loads(properties['input_config'])['splits']
  assert [(split['name'], split['pattern']) for split in splits] == [
      ('train', 'train/*'), ('eval', 'eval/*'), ('test', 'test/*')]
  assert 'split_config' not in json.loads(properties.get('output_config') or '{}')


def test_without_split_folders_the_rows_are_split_by_hash():
  properties = example_gen_of()
  buckets = json.loads(properties['output_config'])['split_config']['splits']
  assert [split['name'] for split in buckets] == ['train', 'eval', 'test']


@pytest.mark.parametrize('bad', [('train', 'test'), ('train', 'eval', 'holdout')])
def test_split_folders_must_name_train_eval_and_test(bad):
  with pytest.raises(ValueError, match='input_splits must name the splits train, eval, test'):
    example_gen_of(input_splits=bad)
