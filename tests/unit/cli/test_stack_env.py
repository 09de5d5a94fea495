"""`raybus up` against real Ray heads: a flag beats the user's environment, which beats the
simulator's head templates; the stack's own servers are never taken from the environment."""

from __future__ import annotations

import argparse

from raybus_sim.devstack import up
from raybus_sim.devstack.stack import stack_env

SIM = {"RAYBUS_NATS_URL": "nats://127.0.0.1:1111", "RAYBUS_REDIS_URL": "redis://127.0.0.1:2222",
       "RAYBUS_KUBECONFIG": "/home/kubeconfig",
       "RAYBUS_DASHBOARD_URL_TEMPLATE": "http://127.0.0.1:3333/{namespace}/{cluster}",
       "RAYBUS_PROXY_URL_TEMPLATE": "http://127.0.0.1:3333/{namespace}/{cluster}/serve"}


def _up_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    up.add_parser(parser.add_subparsers())
    return parser.parse_args(["up", *argv])


def test_without_flags_or_environment_the_simulated_heads_answer() -> None:
    assert stack_env(SIM, {"PATH": "/bin"}, up.flag_env(_up_args())) == SIM


def test_the_users_environment_wins_over_the_simulator() -> None:
    environ = {"RAYBUS_DASHBOARD_URL_TEMPLATE": "http://127.0.0.1:8265",
               "RAYBUS_PROXY_URL_TEMPLATE": "http://127.0.0.1:8000"}
    env = stack_env(SIM, environ, up.flag_env(_up_args()))
    assert env["RAYBUS_DASHBOARD_URL_TEMPLATE"] == "http://127.0.0.1:8265"
    assert env["RAYBUS_PROXY_URL_TEMPLATE"] == "http://127.0.0.1:8000"


def test_a_flag_wins_over_the_users_environment() -> None:
    environ = {"RAYBUS_DASHBOARD_URL_TEMPLATE": "http://env:8265",
               "RAYBUS_PROXY_URL_TEMPLATE": "http://env:8000"}
    args = _up_args("--dashboard-url-template", "http://flag:8265")
    env = stack_env(SIM, environ, up.flag_env(args))
    assert env["RAYBUS_DASHBOARD_URL_TEMPLATE"] == "http://flag:8265"
    assert env["RAYBUS_PROXY_URL_TEMPLATE"] == "http://env:8000"  # no flag: the environment's
    args = _up_args("--proxy-url-template", "http://flag:8000")
    assert stack_env(SIM, environ, up.flag_env(args))["RAYBUS_PROXY_URL_TEMPLATE"] == "http://flag:8000"


def test_an_empty_variable_does_not_blank_the_simulators_template() -> None:
    env = stack_env(SIM, {"RAYBUS_DASHBOARD_URL_TEMPLATE": ""}, {})
    assert env["RAYBUS_DASHBOARD_URL_TEMPLATE"] == SIM["RAYBUS_DASHBOARD_URL_TEMPLATE"]


def test_the_stacks_own_servers_are_not_taken_from_the_environment() -> None:
    environ = {"RAYBUS_NATS_URL": "nats://elsewhere:4222", "RAYBUS_REDIS_URL": "redis://elsewhere",
               "RAYBUS_KUBECONFIG": "/elsewhere"}
    assert stack_env(SIM, environ, {}) == SIM
