"""An admin opens the Status page from the header and sees each environment service host's capacity and how busy it
is, a silent host marked; a manager has no such link, and the page tells them it is for admins."""
import json
import time

import pytest

from envservice import status as host_status
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def report(address: str, *, leased: int, age_s: float = 0.0) -> dict:
    return {"host": address.split(":")[0], "address": address, "lease_timeout_s": 120.0, "leases": leased,
            "steps_per_minute": 42.0, "pools": [{"kind": "miniwob", "capacity": 8, "leased": leased, "idle": 1,
                                                 "warm_target": 1, "crashes": 0}], "reported_at": time.time() - age_s}


@pytest.fixture
def hosts():
    live, gone = "e2e-envhost-a:8200", "e2e-envhost-b:8200"
    client = host_status._redis()
    client.hset(host_status.KEY, live, json.dumps(report(live, leased=3)))
    client.hset(host_status.KEY, gone, json.dumps(report(gone, leased=0, age_s=90)))
    yield live, gone
    host_status.host_withdraw(live)
    host_status.host_withdraw(gone)


def test_an_admin_sees_the_hosts_capacity_and_a_silent_host_a_manager_does_not(daphne_server, page, hosts):
    live, gone = hosts
    make_user("root", staff=True)
    make_user("boss")
    login(page, daphne_server, "root", PASSWORD)
    page.get_by_test_id("status-link").click()
    table = page.get_by_test_id("envservice-hosts")
    table.get_by_text(live).wait_for(timeout=20_000)
    row = table.locator("tr", has_text=live)
    assert "miniwob: 3 of 8 leased, 1 warm" in row.inner_text() and "42" in row.inner_text()
    assert "silent for" in table.locator("tr", has_text=gone).inner_text()
    screenshot(page, "envservice-status")
    assert page.errors == []

    page.get_by_test_id("logout").click()
    login(page, daphne_server, "boss", PASSWORD)
    page.get_by_test_id("current-user").wait_for(timeout=20_000)
    assert page.get_by_test_id("status-link").count() == 0
    page.goto(daphne_server + "/status")
    page.get_by_text("Only admins see the environment service's hosts.").wait_for(timeout=20_000)
