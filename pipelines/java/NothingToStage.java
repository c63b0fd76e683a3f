// Beam's Flink job server uploads its whole classpath (about 150 MB of jars) to the Flink
// cluster for every Beam job, whatever the job's options say: it asks a
// PipelineResourcesDetector what to stage, and the default one lists the classpath. On a
// local cluster, whose JobManager and TaskManagers already have Beam's jars on their own
// classpath (beam_cluster.py), this detector lists nothing, so a job stages nothing.
// beam_cluster.py compiles it against the job server's Beam and names it in the job's
// --pipeline_resources_detector_factory_class.
package tfx_distillery.beam;

import java.util.Collections;
import java.util.List;
import org.apache.beam.sdk.util.construction.resources.PipelineResourcesDetector;

/** A detector of resources to stage that finds none, and its own factory. */
public final class NothingToStage
    implements PipelineResourcesDetector.Factory, PipelineResourcesDetector {

  /** Called by Beam's PipelineResourcesOptions, by name. */
  public static NothingToStage create() {
    return new NothingToStage();
  }

  @Override
  public PipelineResourcesDetector getPipelineResourcesDetector() {
    return this;
  }

  @Override
  public List<String> detect(ClassLoader classLoader) {
    return Collections.emptyList();
  }
}
