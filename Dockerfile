# Image for the compiled Kubeflow / Vertex AI pipeline: TFX's own image plus this package.
#   docker build -t REGISTRY/tfx-distillery:latest . && docker push REGISTRY/tfx-distillery:latest
FROM tensorflow/tfx:1.16.0

# tensorflow-model-optimization needs Keras 2.
ENV TF_USE_LEGACY_KERAS=1
WORKDIR /distillery
COPY pyproject.toml README.md ./
COPY requirements requirements
COPY tfx_distillery tfx_distillery
COPY components components
COPY pipelines pipelines
COPY trainer_modules trainer_modules
RUN pip install --no-cache-dir -c requirements/lock.txt .
