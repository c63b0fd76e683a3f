"""Test set-up shared by the whole suite."""

import os

# Must precede the first TensorFlow import anywhere in the suite.
os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
