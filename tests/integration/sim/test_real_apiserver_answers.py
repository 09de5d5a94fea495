"""The local API server answers the 166 requests of ../shared/kube-apiserver/README.md as a real
kube-apiserver v1.33 did: one row per request, the real answer (status code, reason, message or its
decisive part, causes, warnings, defaulted fields, watch events) as the expectation.

Each row runs against a fresh local API server (no kubelet: the real run had none) over HTTP, in the
namespace `apidiff` the real run used. Requests: kube_runs_*.py; answers: kube_answers.py; matching
rules (placeholders `<uid>` `<ts>` `<ip>` `<rv>` `<age>`, truncated `...` messages, first line of a
multi-line message): kube_http.mismatches. Rows the local server still answers differently are
strict xfails with the reason (listed in sim/raybus_sim/apiserver/README.md too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from raybus_sim.apiserver import RunningApiServer, start_apiserver, write_kubeconfig

from . import (  # noqa: F401 (the kube_runs_* modules register the rows)
    kube_runs_cr,
    kube_runs_gc,
    kube_runs_list,
    kube_runs_pods,
    kube_runs_rbac_events,
    kube_runs_services,
    kube_runs_watch,
    kube_runs_writes,
)
from .kube_answers import README, ROWS, answers, parse_readme
from .kube_http import DIFFERS, NS, RUNNERS, Api, expectation, mismatches

pytestmark = pytest.mark.integration
ANSWERS = answers()


def _params() -> list[object]:
    out: list[object] = []
    for section, title, _ in ROWS:
        key = (section, title)
        marks = [pytest.mark.xfail(strict=True, reason=DIFFERS[key])] if key in DIFFERS else []
        out.append(pytest.param(key, id=f"{section}: {title}", marks=marks))
    return out


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    srv: RunningApiServer = await start_apiserver(kubelet=False, orphan_check_delay=0.05)
    try:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", srv.url, namespace=NS)
        async with aiohttp.ClientSession() as http:
            client = Api(http, srv.url, kubeconfig=kubeconfig)
            await client.ok("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                            ns=None)
            yield client
    finally:
        await srv.stop()


def test_table_mirrors_readme() -> None:
    assert parse_readme(README.read_text()) == ROWS
    assert len(ROWS) == 166


def test_every_row_has_a_request() -> None:
    assert set(RUNNERS) == {(s, t) for s, t, _ in ROWS}
    assert set(DIFFERS) <= set(RUNNERS)


@pytest.mark.parametrize("key", _params())
async def test_answer_matches_the_real_apiserver(api: Api, key: tuple[str, str]) -> None:
    answer = await RUNNERS[key](api)
    assert mismatches(expectation(ANSWERS[key], key), answer) == []
