"""KubeRay's generated RayJob names, with the random suffix derived from stable inputs.

KubeRay: ``utils.GenerateRayClusterName(rayJob.Name)`` and ``utils.GenerateRayJobId(rayJob.Name)``
are ``<rayjob>-<rand.String(5)>``. Here the 5 characters are a hash of (entropy, RayJob uid, attempt)
so a re-decision of the same snapshot yields the same names and a duplicated create collides (409)
instead of creating a second RayCluster.

The attempt key changes whenever KubeRay would draw new names (``initRayJobStatusIfNeed`` after
New, after Retrying and after a resume): a retry bumps ``status.failed``; a resume is a spec change
(``spec.suspend``), which bumps ``metadata.generation``; the previous attempt's ``status.startTime``
(kept when Retrying/Suspending return the RayJob to New) separates attempts further. So every retry
and every resume gets a new RayCluster name and job id - a stale dashboard observation of the
previous cluster can never be mistaken for the new attempt's, and a deleted cluster's name is never
reused.
"""

from __future__ import annotations

from raybus.api.rayjob import RayJob
from raybus.decisions.cluster.naming import random_suffix


def attempt_key(job: RayJob) -> str:
    status = job.status
    failed = status.failed if status is not None and status.failed is not None else 0
    previous_start = status.start_time if status is not None and status.start_time else ""
    return f"{failed}/{job.metadata.generation or 0}/{previous_start}"


def _suffix(job: RayJob, *, entropy: str, what: str) -> str:
    uid = job.metadata.uid or ""
    return random_suffix(entropy or uid, f"rayjob/{uid}/{job.name}/{what}/{attempt_key(job)}")


def generate_ray_cluster_name(job: RayJob, *, entropy: str) -> str:
    """utils.GenerateRayClusterName: ``<rayjob>-<5 chars>``."""
    return f"{job.name}-{_suffix(job, entropy=entropy, what='cluster')}"


def generate_ray_job_id(job: RayJob, *, entropy: str) -> str:
    """utils.GenerateRayJobId: ``<rayjob>-<5 chars>``."""
    return f"{job.name}-{_suffix(job, entropy=entropy, what='jobid')}"
