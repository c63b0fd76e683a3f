# Image for the compiled Kubeflow / Vertex AI pipeline: TFX's own image plus this package.
#   docker build -t REGISTRY/tfx-distillery:latest . && docker push REGISTRY/tfx-distillery:latest
# Beam's SDK harness boot at the SDK's locked version: on a Flink or Spark cluster this image
# runs beside each worker as its worker pool (`/opt/apache/beam/boot --worker_pool`,
# docs/scaling-out.md).
FROM apache/beam_python3.10_sdk:2.62.0 AS beam_sdk

FROM tensorflow/tfx:1.16.0
COPY --from=beam_sdk /opt/apache/beam /opt/apache/beam

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
