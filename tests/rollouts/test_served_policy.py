"""The rollout and live workers of a host ask its one policy server (issue 38): with LOUPE_POLICY_SERVER_URL set (make
run sets it and starts `python -m trainer serve` there), an episode's policy is the served backend, which answers what
the checkpoint answers loaded in the worker itself; make run starts the server."""
import json
import os

import pytest

from agent.policies.local import LocalPolicy
from agent.policies.served import ServedPolicy
from rollouts.models import Episode
from tests.factories import make_tiny_checkpoint
from tests.stack import trainer_start
from webapp.management.commands.loupe_run import process_commands

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": 'Instruction: Click on the "OK" button.'}]


@pytest.fixture
def host_server():
    with open(os.devnull, "w") as devnull:
        proc = trainer_start("serve", "--port", "0", "--threads", "1", stderr=devnull)
    try:
        line = proc.stdout.readline()
        assert line, "server exited before listening"
        yield json.loads(line)["serving"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.django_db
def test_an_episodes_policy_is_the_hosts_server_when_one_is_set(demo, host_server, settings, tmp_path):
    from rollouts.worker import _policies, policy_for

    checkpoint = make_tiny_checkpoint(demo["project"], tmp_path / "v0")
    episode = Episode.objects.create(project=demo["project"], task=demo["task"], seed=1, checkpoint=checkpoint)
    settings.LOUPE_POLICY_SERVER_URL = host_server
    _policies.clear()
    try:
        policy = policy_for(episode)
        assert isinstance(policy, ServedPolicy) and policy_for(episode) is policy
        answer = policy.act(MESSAGES)
    finally:
        _policies.clear()
    local = LocalPolicy(checkpoint.uri, max_new_tokens=policy.max_tokens)
    alone = local.act(MESSAGES)
    assert answer.error is None, answer.error
    assert (answer.text, answer.token_ids) == (alone.text, alone.token_ids)
    assert policy.prompt_style == local.prompt_style  # the rollout renders its prompts in the checkpoint's style


def test_make_run_starts_the_hosts_policy_server_on_its_port(tmp_path):
    argv = process_commands(python="/py", host="127.0.0.1", port=8000, log_dir=tmp_path, beat_schedule=tmp_path / "s",
                            policy_port=8101, policy_threads=2)["policy"]
    assert argv[:4] == ["/py", "-m", "trainer", "serve"] and "--init" not in argv
    assert argv[argv.index("--port") + 1] == "8101" and argv[argv.index("--threads") + 1] == "2"
    assert "policy" not in process_commands(python="/py", host="127.0.0.1", port=8000, log_dir=tmp_path,
                                            beat_schedule=tmp_path / "s")
