"""The tfx-distillery pipeline and its runners."""

import os

# tensorflow-model-optimization needs Keras 2; this must happen before TF loads.
os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
