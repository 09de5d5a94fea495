"""webhook: KubeRay's optional validating webhooks for RayCluster, RayJob and RayService."""
