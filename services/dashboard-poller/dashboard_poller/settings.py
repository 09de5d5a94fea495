"""The dashboard-poller's settings (flags / RAYBUS_* env in __main__)."""

from __future__ import annotations

from pydantic import Field

from raybus.adapters.dashboard import IN_CLUSTER_TEMPLATE, DashboardTimeouts
from raybus.bus.streams import BusSettings
from raybus.decisions.dashboard_poll import PollSettings
from raybus.runtime.service import CommonSettings

SERVICE = "dashboard-poller"
IN_CLUSTER_PROXY_TEMPLATE = "http://{pod_ip}:{port}"  # KubeRay: the head pod's IP, Serve port


class PollerSettings(CommonSettings):
    service: str = SERVICE
    dashboard_url_template: str = IN_CLUSTER_TEMPLATE
    # Serve proxy of a head pod: {namespace} {cluster} {pod} {pod_ip} {port}
    proxy_url_template: str = IN_CLUSTER_PROXY_TEMPLATE
    fast_interval_s: float = 1.0
    slow_interval_s: float = 30.0
    fresh_window_s: float = 15.0
    # Serve's application status alone, this often per cluster whose Serve apps are declared
    # (KubeRay reads it every 2 s per RayService; an app can turn UNHEALTHY with no signal to
    # raybus); 0: only the change-driven reads and the slow safety net (docs/dashboard-poller.md).
    serve_interval_s: float = Field(default=2.0, ge=0)
    backoff_cap_s: float = 30.0
    unreachable_after: int = 2
    read_timeout_s: float = 2.0
    job_write_timeout_s: float = 10.0
    serve_put_timeout_s: float = 20.0
    serve_delete_timeout_s: float = 15.0
    # Short: a crashed poller's commands come back quickly; slow writes send in-progress acks.
    ack_wait_s: float = 5.0
    max_deliver: int = 20
    lease_ttl_s: float = 10.0
    max_rounds_in_flight: int = 64  # heads read at once (each head: one request at a time)
    max_commands_in_flight: int = 64
    # Log tail streams of followed jobs (HTTPMode/InteractiveMode's job-end signal): at most this
    # many held at once (file descriptors; beyond it those jobs' ends are seen by polling, 0: none),
    # pinged this often so a head that vanished silently is noticed (0: never).
    max_follow_streams: int = 4096
    follow_heartbeat_s: float = 30.0
    # Job ends pushed by Ray heads (ray_events.py): listen here when a key is set (RAYBUS_RAY_EVENTS_KEY,
    # the same key the cluster-reconciler derives each cluster's token from); port 0 picks a free one.
    ray_events_key: str = Field(default="", repr=False)
    ray_events_host: str = "0.0.0.0"
    ray_events_port: int = 8266
    # Admission (dashboard_poller/admission.py): a command is sent only if the live RayJob's or
    # RayService's decision could have produced it; how long one whose owner the poller's
    # informers have not seen yet is retried before it is refused.
    admission_wait_s: float = 30.0
    watch_namespace: str = ""  # RAYBUS_WATCH_NAMESPACE, KubeRay's watchNamespace (comma-separated): the informers' scope
    # Off only for tests of the command mechanics against bare simulated heads, which have no
    # API server; admission has its own tests. Not a flag: never off in a deployment.
    admission: bool = True

    def poll(self) -> PollSettings:
        return PollSettings(fast_interval_s=self.fast_interval_s, slow_interval_s=self.slow_interval_s,
                            fresh_window_s=self.fresh_window_s, serve_interval_s=self.serve_interval_s,
                            backoff_cap_s=self.backoff_cap_s,
                            unreachable_after=self.unreachable_after)

    def timeouts(self) -> DashboardTimeouts:
        return DashboardTimeouts(read_s=self.read_timeout_s, submit_job_s=self.job_write_timeout_s,
                                 stop_job_s=self.job_write_timeout_s,
                                 delete_job_s=self.job_write_timeout_s,
                                 serve_put_s=self.serve_put_timeout_s,
                                 serve_delete_s=self.serve_delete_timeout_s)

    def bus(self) -> BusSettings:
        return BusSettings(partitions=self.partitions, executor_ack_wait_s=self.ack_wait_s,
                           max_deliver=self.max_deliver, lease_ttl_s=self.lease_ttl_s,
                           declare=self.bus_declare)
