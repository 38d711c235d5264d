"""A kind's pool keeps its warm envs (real Chromium MiniWoB envs), and makes another once one is leased."""
import time

import pytest

from envservice.pool import Pool, PoolFull


def test_a_leased_warm_env_is_replaced_by_a_fresh_warm_one_and_capacity_holds():
    pool = Pool("miniwob", warm=1, capacity=2, call_timeout=60)
    try:
        pool.fill()
        assert pool.status()["idle"] == 1
        actor, warm = pool.acquire()
        assert warm and actor.call(lambda env: env.browser_pid, timeout=30)  # its browser is up already
        deadline = time.monotonic() + 60
        while pool.status()["idle"] < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pool.status() == {"kind": "miniwob", "capacity": 2, "leased": 1, "idle": 1, "warm_target": 1,
                                "crashes": 0}
        second, warm = pool.acquire()
        assert warm and second is not actor
        with pytest.raises(PoolFull, match="all 2 miniwob envs"):
            pool.acquire()
        pool.give_back(actor)
        assert pool.status()["leased"] == 1
    finally:
        pool.close()
