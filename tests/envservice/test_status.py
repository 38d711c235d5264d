"""The admin's view of the environment service: every host reports its pools into Redis at each reaper sweep, the
web API shows them (admins only), a host that stops reporting shows as silent, one that stops cleanly leaves."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest
from rest_framework.test import APIClient

from envservice import status as host_status
from envservice.client import EnvServiceClient
from tests.envservice.conftest import TASK
from tests.factories import make_user
from tests.stack import ROOT, free_port, stack_env

pytestmark = pytest.mark.django_db(transaction=True)


def reported(address: str, predicate, timeout: float = 30.0) -> dict:
    """The host's entry once a sweep has reported what ``predicate`` waits for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for host in host_status.hosts_status()["hosts"]:
            if host["address"] == address and predicate(host):
                return host
        time.sleep(0.5)  # the reaper's sweep is the event; it runs every few seconds
    raise AssertionError(f"no report from {address} within {timeout} s")


def test_admins_see_each_hosts_capacity_and_leases_others_get_403_and_silent_hosts_are_marked(
        service, manager_token):
    url, svc = service
    project, token = manager_token
    svc.lease_timeout = 20  # sweeps every 5 s
    lease = EnvServiceClient(url, token).lease(project=project.pk, task=TASK, seed=2)
    host = reported(svc.address, lambda h: h["leases"] == 1)
    assert host["pools"][0]["kind"] == "miniwob" and host["pools"][0]["capacity"] == 4
    assert host["pools"][0]["leased"] == 1 and not host["silent"]

    admin = APIClient()
    admin.force_authenticate(make_user(staff=True))
    page = admin.get("/api/v1/envservice/hosts").json()
    mine = next(h for h in page["hosts"] if h["address"] == svc.address)
    assert mine["leases"] == 1
    miniwob = next(k for k in page["kinds"] if k["kind"] == "miniwob")
    assert miniwob["capacity"] >= 4 and miniwob["leased"] >= 1
    manager = APIClient()
    manager.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    refused = manager.get("/api/v1/envservice/hosts")
    assert refused.status_code == 403 and "admins" in refused.json()["detail"]

    gone = {**host, "address": "gone-host:8200"}  # a host that stopped reporting a minute ago
    host_status._redis().hset(host_status.KEY, gone["address"], json.dumps({**gone, "reported_at": time.time() - 60}))
    silent = next(h for h in host_status.hosts_status()["hosts"] if h["address"] == "gone-host:8200")
    assert silent["silent"] and silent["age_s"] >= 60
    host_status.host_withdraw("gone-host:8200")

    EnvServiceClient(url, token).release(lease["lease"])
    svc.close()  # a host that stops takes its report back (the fixture's stop closes it again, harmlessly)
    assert svc.address not in {h["address"] for h in host_status.hosts_status()["hosts"]}


def test_the_command_stopped_by_sigterm_takes_its_report_off_the_status_page(tmp_path):
    port = free_port()
    with open(tmp_path / "envservice.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "manage.py", "envservice", "--port", str(port), "--pools",
                                 "miniwob=0:2", "--lease-timeout", "8"], cwd=ROOT, env=stack_env(),
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            host = reported(f"{socket.gethostname()}:{port}", lambda h: h["pools"][0]["capacity"] == 2, timeout=60)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    assert host["address"] not in {h["address"] for h in host_status.hosts_status()["hosts"]}
