"""Requests of the README's sections 1-pod-validation and 2-pod-defaults."""

from __future__ import annotations

from typing import Any

from .kube_http import Answer, Api, Json, case

S1, S2 = "1-pod-validation", "2-pod-defaults"


def ctr(name: str = "c", image: str = "busybox:1.36", **kw: Any) -> Json:
    return {"name": name, "image": image, **kw}


def pod(name: str, *containers: Json, labels: dict[str, str] | None = None, **spec: Any) -> Json:
    meta: Json = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": list(containers) or [ctr()], **spec}}


async def create_pod(api: Api, body: Json, query: dict[str, str] | None = None) -> Answer:
    return (await api.create("pods", body, query=query)).answer()


def _pod_case(title: str, body: Json, query: dict[str, str] | None = None) -> None:
    async def run(api: Api) -> Answer:
        return await create_pod(api, body, query)
    case(S1, title)(run)


_pod_case("cpu '1x'", pod("v-cpu", ctr(resources={"limits": {"cpu": "1x"}})))
_pod_case("memory '-1Gi'", pod("v-mem", ctr(resources={"limits": {"memory": "-1Gi"}})))
_pod_case("missing image", pod("v-noimg", {"name": "c"}))
_pod_case("duplicate container names", pod("v-dupc", ctr(), ctr()))
_pod_case("uppercase name", pod("Bad-Name"))
_pod_case("64-char name (valid subdomain)", pod("a" * 64))
_pod_case("254-char name", pod("a" * 254))
_pod_case("invalid label value", pod("v-lbl", labels={"k": "bad value!"}))
_pod_case("64-char label value", pod("v-lbl2", labels={"k": "x" * 64}))
_pod_case("restartPolicy Sometimes", pod("v-rp", restartPolicy="Sometimes"))
_pod_case("env name 'BAD=NAME'", pod("v-env1", ctr(env=[{"name": "BAD=NAME", "value": "1"}])))
_pod_case("env name '1BAD' (relaxed in 1.33)", pod("v-env2", ctr(env=[{"name": "1BAD", "value": "1"}])))
_pod_case("env name empty", pod("v-env3", ctr(env=[{"name": "", "value": "1"}])))
_pod_case("volumeMount to undefined volume", pod("v-vm", ctr(volumeMounts=[{"name": "nope", "mountPath": "/x"}])))
_pod_case("duplicate containerPort (same proto)",
          pod("v-port1", ctr(ports=[{"containerPort": 80}, {"containerPort": 80}])))
_pod_case("duplicate port names",
          pod("v-port2", ctr(ports=[{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}])))
_pod_case("duplicate hostPort", pod("v-port3", ctr(ports=[{"containerPort": 80, "hostPort": 8080},
                                                          {"containerPort": 81, "hostPort": 8080}])))
_pod_case("containerPort 0", pod("v-port4", ctr(ports=[{"containerPort": 0}])))
_pod_case("missing serviceAccountName", pod("v-sa", serviceAccountName="nosuchsa"))
_pod_case("requests > limits", pod("v-rl", ctr(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})))
_pod_case("no containers", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "v-empty"},
                            "spec": {"containers": []}})
_pod_case("unknown field in pod spec (no fieldValidation)", pod("v-unk", foo="bar"))
_pod_case("invalid container name (uppercase)", pod("v-cname", ctr("C_1")))
_pod_case("label key invalid", pod("v-lk", labels={"-bad": "x"}))
_pod_case("resourceVersion set on create", {**pod("v-rv"), "metadata": {"name": "v-rv", "resourceVersion": "5"}})
_pod_case("unknown field with fieldValidation=Strict", pod("v-strict", foo="bar"), {"fieldValidation": "Strict"})


@case(S1, "pod spec update (change command) -> immutability error")
async def _pod_update_immutable(api: Api) -> Answer:
    created = await api.ok("pods", pod("v-imm", ctr(command=["sleep", "1"])))
    created["spec"]["containers"][0]["command"] = ["sleep", "2"]
    return (await api.put("pods", "v-imm", created)).answer()


# --- 2: every row reads one defaulted field of the same created pod ------------------------------------
DEFAULTS_POD = pod("defaults",
                   ctr("a", "busybox", ports=[{"containerPort": 80}]),
                   ctr("b", "busybox:latest"),
                   ctr("d", "busybox:1.36", resources={"limits": {"cpu": "1", "memory": "1Gi"}}))


async def _defaults(api: Api) -> Answer:
    return (await api.create("pods", DEFAULTS_POD)).answer()


for _field in ("spec.dnsPolicy", "spec.schedulerName", "spec.securityContext", "spec.enableServiceLinks",
               "spec.priority", "spec.tolerations", "spec.containers.0.imagePullPolicy",
               "spec.containers.1.imagePullPolicy", "spec.containers.2.imagePullPolicy",
               "spec.containers.0.ports.0.protocol", "spec.containers.0.terminationMessagePath",
               "spec.containers.0.terminationMessagePolicy", "spec.restartPolicy",
               "spec.terminationGracePeriodSeconds", "spec.preemptionPolicy", "spec.serviceAccount",
               "spec.serviceAccountName", "spec.containers.2.resources", "status.phase", "status.qosClass",
               "metadata.generation"):
    case(S2, f"default {_field}")(_defaults)
