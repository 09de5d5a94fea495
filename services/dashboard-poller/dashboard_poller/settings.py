"""The dashboard-poller's settings: every field a flag `--field-name` and a variable RAYBUS_FIELD_NAME
(runtime.settings.load)."""

from __future__ import annotations

from pydantic import Field

from raybus.adapters.dashboard import IN_CLUSTER_TEMPLATE, DashboardTimeouts
from raybus.bus.streams import BusSettings
from raybus.decisions.dashboard_poll import PollSettings
from raybus.runtime.settings import NOT_A_FLAG, SECRET, CommonSettings

SERVICE = "dashboard-poller"
IN_CLUSTER_PROXY_TEMPLATE = "http://{pod_ip}:{port}"  # KubeRay: the head pod's IP, Serve port


class PollerSettings(CommonSettings):
    service: str = Field(default=SERVICE, json_schema_extra=NOT_A_FLAG)
    kubeconfig: str | None = Field(default=None, description="kubeconfig file (default: in-cluster config)")
    dashboard_url_template: str = Field(default=IN_CLUSTER_TEMPLATE, description="a head's dashboard URL: {service} {namespace} {cluster}")
    # Serve proxy of a head pod: {namespace} {cluster} {pod} {pod_ip} {port}
    proxy_url_template: str = Field(default=IN_CLUSTER_PROXY_TEMPLATE, description="a head's Serve proxy URL: {namespace} {cluster} {pod} {pod_ip} {port}")
    fast_interval_s: float = Field(default=1.0, description="poll interval of a cluster whose jobs or Serve apps are changing")
    slow_interval_s: float = Field(default=30.0, description="poll interval of a steady cluster (the safety net)")
    fresh_window_s: float = Field(default=15.0, description="how long after a change a cluster is polled fast")
    # Serve's application status alone, this often per cluster whose Serve apps are declared
    # (KubeRay reads it every 2 s per RayService; an app can turn UNHEALTHY with no signal to
    # raybus); 0: only the change-driven reads and the slow safety net (docs/dashboard-poller.md).
    serve_interval_s: float = Field(default=2.0, ge=0, description="Serve application status read interval per cluster with Serve apps (0: off)")
    backoff_cap_s: float = Field(default=30.0, description="longest back-off of an unreachable head")
    unreachable_after: int = Field(default=2, description="failed reads before a head counts as unreachable")
    read_timeout_s: float = Field(default=2.0, description="timeout of a dashboard read")
    job_write_timeout_s: float = Field(default=10.0, description="timeout of a job submit / stop / delete")
    serve_put_timeout_s: float = Field(default=20.0, description="timeout of a Serve config PUT")
    serve_delete_timeout_s: float = Field(default=15.0, description="timeout of a Serve application delete")
    # Short: a crashed poller's commands come back quickly; slow writes send in-progress acks.
    ack_wait_s: float = Field(default=5.0, description="dashboard-command consumers' ack wait (in-progress acks keep slow writes alive)")
    max_deliver: int = Field(default=20, description="deliveries of one dashboard command before it is dead-lettered")
    lease_ttl_s: float = Field(default=10.0, description="partition lease TTL")
    max_rounds_in_flight: int = Field(default=64, description="heads read at once (each head: one request at a time)")
    max_commands_in_flight: int = Field(default=64, description="dashboard commands sent at once")
    # Log tail streams of followed jobs (HTTPMode/InteractiveMode's job-end signal): at most this
    # many held at once (file descriptors; beyond it those jobs' ends are seen by polling, 0: none),
    # pinged this often so a head that vanished silently is noticed (0: never).
    max_follow_streams: int = Field(default=4096, description="job log tail streams held at once (0: none)")
    follow_heartbeat_s: float = Field(default=30.0, description="ping interval of a followed log stream (0: never)")
    # Job ends pushed by Ray heads (ray_events.py): listen here when a key is set (RAYBUS_RAY_EVENTS_KEY,
    # the same key the cluster-reconciler derives each cluster's token from); port 0 picks a free one.
    ray_events_key: str = Field(default="", repr=False, json_schema_extra=SECRET,
                                description="key the cluster-reconciler derives each cluster's event token from; set: listen")
    ray_events_host: str = Field(default="0.0.0.0", description="address of the Ray-event receiver")
    ray_events_port: int = Field(default=8266, description="port of the Ray-event receiver (0: a free one)")
    # Admission (dashboard_poller/admission.py): a command is sent only if the live RayJob's or
    # RayService's decision could have produced it; how long one whose owner the poller's
    # informers have not seen yet is retried before it is refused.
    admission_wait_s: float = Field(default=30.0, description="how long a command whose owner the informers have not seen is retried before it is refused")
    watch_namespace: str = Field(default="", description="KubeRay's watchNamespace, comma-separated: the informers' scope")
    # Off only for tests of the command mechanics against bare simulated heads, which have no
    # API server; admission has its own tests. Not a flag: never off in a deployment.
    admission: bool = Field(default=True, json_schema_extra=NOT_A_FLAG)

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
                           declare=self.bus_declare, replicas=self.stream_replicas)
