"""One policy server a host (issue 38): trainer/serve.py's continuous batching decodes concurrent requests together,
each answered as the model alone answers it, with OpenAI's logprobs and top_logprobs; a server started without a
model serves what agent/policies/served.py loads into it; it keeps a bounded number of models."""

import json
import os
import time
import urllib.error
import urllib.request

import pytest
import torch

from agent.policies.local import LocalPolicy
from tests.stack import trainer_start
from trainer.model import save_tiny_untrained



def _messages(i: int) -> list[dict]:
    # prompts of different lengths: the batch pads them to the longest
    return [{"role": "system", "content": "sys"},
            {"role": "user", "content": f'Instruction: Click on the "OK {i}" button.' + " Then wait." * (3 * i)}]


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            raw = response.read()
            plain = not response.headers.get_content_type().endswith("json")  # vLLM's adapter routes answer text
            return response.status, {"text": raw.decode()} if plain else json.loads(raw or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("batching")
    return save_tiny_untrained(root / "a", seed=0), save_tiny_untrained(root / "b", seed=1)


def test_four_requests_queued_at_once_are_decoded_together_each_as_the_model_alone_answers(checkpoints):
    from trainer.batching import Batcher

    torch.set_num_threads(1)
    policy = LocalPolicy(checkpoints[0], max_new_tokens=20)
    alone = [policy.act(_messages(i)) for i in range(4)]
    batcher = Batcher(policy)
    with batcher._wake:  # the loop sees all four at once
        requests = [batcher.submit(policy.prompt_ids(_messages(i)), max_tokens=20, temperature=0.0, top_k=2)
                    for i in range(4)]
    for request in requests:
        assert request.done.wait(120)
    batcher.close()
    assert batcher.largest_batch == 4
    for request, solo in zip(requests, alone):
        assert request.error is None
        assert request.ids == solo.token_ids and request.text == solo.text
        assert request.logprobs == pytest.approx(solo.token_logprobs, abs=1e-4)
        # greedy: the best alternative is the token taken; the runner-up is LocalPolicy's too
        assert [top[0][0] for top in request.tops] == request.ids
        assert [lp for top in request.tops for _, lp in top] == pytest.approx(
            [lp for top in solo.top_logprobs for lp in top], abs=1e-4)


@pytest.fixture(scope="module")
def host_server():
    with open(os.devnull, "w") as devnull:
        proc = trainer_start("serve", "--port", "0", "--max-new-tokens", "16", "--threads", "1", stderr=devnull)
    try:
        line = proc.stdout.readline()
        assert line, "server exited before listening"
        yield json.loads(line)["serving"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_host_server_serves_the_checkpoint_a_worker_asks_for_with_logprobs_and_alternatives(host_server, checkpoints):
    from agent.policies import make_policy

    served = make_policy("served", base_url=host_server, checkpoint_dir=checkpoints[0], max_tokens=16)
    answer = served.act(_messages(1))
    alone = LocalPolicy(checkpoints[0], max_new_tokens=16).act(_messages(1))
    assert answer.error is None, answer.error
    assert (answer.text, answer.token_ids, answer.token_ends) == (alone.text, alone.token_ids, alone.token_ends)
    assert answer.token_logprobs == pytest.approx(alone.token_logprobs, abs=1e-4)
    assert [lp for top in answer.top_logprobs for lp in top] == pytest.approx(
        [lp for top in alone.top_logprobs for lp in top], abs=1e-4)
    # a second worker process asking for the same dir shares the loaded copy
    again = make_policy("served", base_url=host_server, checkpoint_dir=checkpoints[0], max_tokens=16)
    assert again.model == served.model and again.act(_messages(1)).text == alone.text
    status, models = 0, None
    with urllib.request.urlopen(f"{host_server}/models", timeout=30) as response:
        status, models = response.status, json.loads(response.read())
    assert status == 200 and [m["id"] for m in models["data"]] == [served.model]


def test_a_host_server_refuses_bad_requests_plainly(host_server, checkpoints):
    url = f"{host_server}/chat/completions"
    status, body = _post(url, {"model": "nobody", "messages": _messages(0)})
    assert status == 404 and body["error"]["type"] == "model_not_found"
    status, body = _post(host_server.removesuffix("/v1") + "/v1/load_lora_adapter",
                         {"lora_name": "x", "lora_path": str(checkpoints[0].parent / "missing")})
    assert status == 400 and "neither a checkpoint dir" in body["error"]["message"]
    from agent.policies.served import served_name

    _post(host_server.removesuffix("/v1") + "/v1/load_lora_adapter",
          {"lora_name": served_name(checkpoints[0]), "lora_path": str(checkpoints[0])})
    base = {"model": served_name(checkpoints[0]), "messages": _messages(0), "logprobs": True}
    status, body = _post(url, {**base, "top_logprobs": 21})
    assert status == 400 and "'top_logprobs' must be an integer from 0 to 20" in body["error"]["message"]
    status, body = _post(url, {**base, "stop": ["a", "b", "c", "d", "e"]})
    assert status == 400 and "'stop'" in body["error"]["message"]


def test_loading_past_the_limit_lets_the_least_recently_asked_for_model_go(checkpoints, monkeypatch):
    from trainer import serve

    monkeypatch.setattr(serve, "MAX_LOADED", 1)
    registry = serve.ModelRegistry(None, None, 8)
    try:
        registry.load("a", str(checkpoints[0]))
        registry.load("b", str(checkpoints[1]))
        assert [s.name for s in registry.list()] == ["b"]
        with pytest.raises(serve.APIError) as refused:
            registry.get("a")
        assert refused.value.kind == "model_not_found"
    finally:
        registry.close()


def test_a_lone_greedy_request_checks_drafted_tokens_and_answers_as_local_policy(checkpoints):
    from trainer.batching import Batcher

    torch.set_num_threads(1)
    policy = LocalPolicy(checkpoints[0], max_new_tokens=24)
    batcher = Batcher(policy)
    try:
        for i in range(2):
            solo = policy.act(_messages(i))
            before = batcher.passes
            request = batcher.generate(policy.prompt_ids(_messages(i)), max_tokens=24, temperature=0.0, top_k=2)
            assert request.ids == solo.token_ids and request.text == solo.text
            assert request.logprobs == pytest.approx(solo.token_logprobs, abs=1e-4)
            assert batcher.passes - before < len(request.ids) - 1  # prompt lookup took several tokens a pass
    finally:
        batcher.close()


def _four_at_once(batcher, policy, temperatures=(0.0,) * 4, max_tokens=24) -> list:
    with batcher._wake:  # the loop sees all four at once
        requests = [batcher.submit(policy.prompt_ids(_messages(i)), max_tokens=max_tokens, temperature=t, top_k=2)
                    for i, t in enumerate(temperatures)]
    for request in requests:
        assert request.done.wait(120) and request.error is None
    return requests


def test_batched_greedy_requests_check_drafted_tokens_and_answer_as_the_model_alone(checkpoints):
    """Every greedy row of a batch feeds the tokens prompt lookup drafts and keeps those the model would choose: four
    answers together take fewer passes than the longest answer has tokens, and each is the one LocalPolicy gives
    alone."""
    from trainer.batching import Batcher

    torch.set_num_threads(1)
    policy = LocalPolicy(checkpoints[0], max_new_tokens=24)
    alone = [policy.act(_messages(i)) for i in range(4)]
    batcher = Batcher(policy)
    try:
        requests = _four_at_once(batcher, policy)
    finally:
        batcher.close()
    assert batcher.largest_batch == 4
    assert batcher.passes < max(len(r.ids) for r in requests) - 1, "no drafted token was taken in the batch"
    for request, solo in zip(requests, alone):
        assert request.ids == solo.token_ids and request.text == solo.text
        assert request.logprobs == pytest.approx(solo.token_logprobs, abs=1e-4)


@pytest.mark.parametrize("compact_above", [64, 1])
def test_refused_drafts_hidden_in_the_cache_change_no_answer_kept_or_compacted_away(checkpoints, monkeypatch,
                                                                                    compact_above):
    """A refused draft stays in a row's cache behind a zero in the mask. Garbage columns put among every row's
    kept ones after each pass change no answer while they stay (64), nor once the rows' kept columns are moved
    together at the next pass (1)."""
    from trainer import batching
    from trainer.batching import Batcher

    torch.set_num_threads(1)
    monkeypatch.setattr(batching, "COMPACT_ABOVE", compact_above)
    policy = LocalPolicy(checkpoints[0], max_new_tokens=24)
    alone = [policy.act(_messages(i)) for i in range(4)]
    batcher = Batcher(policy)
    step = batcher._step

    def step_then_hole() -> None:
        step()
        if batcher._cache is not None:  # a column of noise before each row's last kept one
            cut = batcher._mask.shape[1] - 1
            batcher._mask = torch.cat([batcher._mask[:, :cut], torch.zeros_like(batcher._mask[:, :1]),
                                       batcher._mask[:, cut:]], dim=1)
            for layer in batcher._cache.layers:
                for name in ("keys", "values"):
                    t = getattr(layer, name)
                    setattr(layer, name, torch.cat([t[:, :, :cut], 50 * torch.randn_like(t[:, :, :1]), t[:, :, cut:]],
                                                   dim=2))

    batcher._step = step_then_hole
    try:
        requests = _four_at_once(batcher, policy)
    finally:
        batcher.close()
    assert (batcher.compactions > 0) == (compact_above == 1)
    for request, solo in zip(requests, alone):
        assert request.ids == solo.token_ids
        assert request.logprobs == pytest.approx(solo.token_logprobs, abs=1e-4)


def test_a_sampled_request_in_a_batch_feeds_one_token_a_pass_and_the_greedy_rows_still_answer_as_alone(checkpoints):
    from trainer.batching import Batcher

    torch.set_num_threads(1)
    policy = LocalPolicy(checkpoints[0], max_new_tokens=24)
    alone = [policy.act(_messages(i)) for i in range(4)]
    batcher = Batcher(policy)
    fed: dict[str, list] = {"sampled": [], "greedy": []}  # each pass's fed tokens a row, as the mask shows them
    forward = batcher._forward

    def recording(**inputs):
        if "attention_mask" in inputs:  # a decoding pass (a prompt is read alone, without one)
            width = inputs["input_ids"].shape[1]
            for row, request in enumerate(batcher._active):
                kind = "sampled" if request.temperature > 0 else "greedy"
                fed[kind].append(int(inputs["attention_mask"][row, -width:].sum()))
        return forward(**inputs)

    batcher._forward = recording
    try:
        requests = _four_at_once(batcher, policy, temperatures=(0.0, 1.0, 0.0, 0.0))
    finally:
        batcher.close()
    assert len(requests[1].ids) == len(requests[1].logprobs) > 0
    assert fed["sampled"] and set(fed["sampled"]) == {1}  # a sampled token cannot be checked against a draft
    assert max(fed["greedy"]) > 1
    for i in (0, 2, 3):
        assert requests[i].ids == alone[i].token_ids
        assert requests[i].logprobs == pytest.approx(alone[i].token_logprobs, abs=1e-4)


def test_a_request_decoding_long_gets_passes_between_the_prompts_read_and_all_answer_as_alone(checkpoints,
                                                                                            monkeypatch):
    """Once a request has decoded past STARVED_S, the prompts that keep arriving are read one every STARVED_PASSES
    passes, not all before its next pass; every answer is still LocalPolicy's."""
    from trainer import batching
    from trainer.batching import Batcher

    torch.set_num_threads(1)
    monkeypatch.setattr(batching, "STARVED_S", 0.0)  # every request is starved at once
    policy = LocalPolicy(checkpoints[0], max_new_tokens=24)
    alone = [policy.act(_messages(i)) for i in range(1, 5)]
    policy.max_new_tokens = 300
    alone.insert(0, policy.act(_messages(0)))  # the long one
    batcher = Batcher(policy)
    events: list[str] = []
    join, step = batcher._join, batcher._step
    batcher._join = lambda request: events.append("join") or join(request)
    batcher._step = lambda: events.append("pass") or step()
    try:
        with batcher._wake:  # one request starts alone; four more wait from its first pass on
            first = batcher.submit(policy.prompt_ids(_messages(0)), max_tokens=300, temperature=0.0)
            later = [batcher.submit(policy.prompt_ids(_messages(i)), max_tokens=24, temperature=0.0)
                     for i in range(1, 5)]
            batcher._waiting = batcher._waiting[:1]  # the four come once it has joined
        while "pass" not in events:
            time.sleep(0.001)
        with batcher._wake:
            batcher._waiting.extend(later)
            batcher._wake.notify()
        for request in [first, *later]:
            assert request.done.wait(120) and request.error is None
    finally:
        batcher.close()
    joins = [i for i, event in enumerate(events) if event == "join"]
    assert len(joins) == 5 and len(first.ids) > 100 and events[joins[-1]:].count("pass") > 1  # still decoding
    gaps = [b - a - 1 for a, b in zip(joins[1:], joins[2:])]  # passes between two prompts read while one decodes
    assert gaps and all(gap >= batching.STARVED_PASSES - 1 for gap in gaps), events
    for request, solo in zip([first, *later], alone):
        assert request.ids == solo.token_ids


def _step_messages(i: int, steps: int) -> list[dict]:
    """An episode's prompt at its ``steps``-th step: the earlier screens and actions, then the new screen."""
    messages = [{"role": "system", "content": "sys"}]
    for k in range(steps + 1):
        messages.append({"role": "user", "content": f'Screen {k} of episode {i}: [button] "OK {k}" at ({k}, 5)'
                                                    + " [text] more" * (4 + i)})
        if k < steps:
            messages.append({"role": "assistant", "content": f"Thought: go.\nAction: click(x={k}, y=5)"})
    return messages


def test_an_episodes_next_prompts_read_only_their_new_tokens_and_answer_as_the_model_alone(checkpoints):
    """The KV cache of each answered request is kept: a step whose prompt extends the last one's reads only the new
    turn, batched or alone, and answers the tokens and logprobs LocalPolicy gives the whole prompt."""
    from trainer.batching import Batcher

    torch.set_num_threads(1)
    policy = LocalPolicy(checkpoints[0], max_new_tokens=12)
    batcher = Batcher(policy)
    try:
        for steps in range(3):
            with batcher._wake:  # four episodes' steps decoded together
                requests = [batcher.submit(policy.prompt_ids(_step_messages(i, steps)), max_tokens=12,
                                           temperature=0.0, top_k=2) for i in range(4)]
            for i, request in enumerate(requests):
                assert request.done.wait(120) and request.error is None
                solo = policy.act(_step_messages(i, steps))
                assert request.ids == solo.token_ids and request.text == solo.text
                assert request.logprobs == pytest.approx(solo.token_logprobs, abs=1e-4)
                assert [lp for top in request.tops for _, lp in top] == pytest.approx(
                    [lp for top in solo.top_logprobs for lp in top], abs=1e-4)
                if steps:  # everything up to the last step's new turn came from the cache
                    last = len(policy.prompt_ids(_step_messages(i, steps - 1)))
                    assert last <= request.reused < len(request.prompt)
        assert batcher.prefixes.hits >= 8
    finally:
        batcher.close()


def test_the_prefix_cache_keeps_the_latest_entries_within_its_budget():
    from trainer.batching import PrefixCache

    def layers(n: int) -> list[tuple]:  # two layers of 1 x 2 heads x n tokens x 4 float32: 128 bytes a token
        return [(torch.full((1, 2, n, 4), float(n)), torch.zeros(1, 2, n, 4)) for _ in range(2)]

    cache = PrefixCache(budget_mb=1)
    cache.budget = 128 * 100  # room for 100 tokens
    cache.put(list(range(40)), layers(40))
    cache.put(list(range(100, 150)), layers(50))
    cache.put(list(range(200, 240)), layers(40))  # over the budget: the oldest leaves
    assert len(cache) == 2 and cache.size_bytes == 128 * 90
    assert cache.take(list(range(45))) == (0, None)
    n, shared = cache.take([*range(100, 120), 7, 8])  # a shared part is copied, the entry stays
    assert n == 20 and shared[0][0].shape == (1, 2, 20, 4) and len(cache) == 2
    n, whole = cache.take([*range(200, 240), 1])  # a prompt extending an entry whole takes it over
    assert n == 40 and whole[1][0].shape == (1, 2, 40, 4) and len(cache) == 1
    assert cache.take(list(range(200, 240)))[0] == 0  # never the whole prompt: its last token is read
    assert cache.take([*range(100, 110)])[0] == 0  # under MIN_REUSE tokens: not worth a copy


def test_a_prompt_longer_than_the_context_and_malformed_json_are_refused_plainly(host_server, checkpoints):
    from agent.policies.served import served_name

    root = host_server.removesuffix("/v1")
    request = urllib.request.Request(f"{host_server}/chat/completions", data=b'{"messages": [', method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400 and "not valid JSON" in json.loads(refused.value.read())["error"]["message"]
    status, body = _post(f"{root}/v1/unload_lora_adapter", {"lora_name": "never-loaded"})
    assert status == 404 and "cannot be found" in body["error"]["message"]
    name = served_name(checkpoints[0])
    _post(f"{root}/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(checkpoints[0])})
    long = [{"role": "user", "content": "word " * 5000}]  # the tiny model reads 4096 tokens
    status, body = _post(f"{host_server}/chat/completions", {"model": name, "messages": long})
    assert status == 400 and "this model reads at most 4096" in body["error"]["message"], body
    status, body = _post(f"{host_server}/chat/completions", {"model": name, "messages": _messages(0), "max_tokens": 4})
    assert status == 200 and body["choices"][0]["message"]["content"] is not None  # the server goes on


def test_a_client_that_goes_away_mid_answer_leaves_the_batch_and_the_others_are_answered(checkpoints):
    import socket
    import threading
    import time
    from http.server import ThreadingHTTPServer

    from trainer.serve import ModelRegistry, make_handler

    torch.set_num_threads(1)
    registry = ModelRegistry(str(checkpoints[0]), "m", 16)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(registry))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    batcher = registry.get("m").batcher
    submitted: list = []
    submit = batcher.submit
    batcher.submit = lambda *args, **kwargs: submitted.append(submit(*args, **kwargs)) or submitted[-1]
    try:
        body = json.dumps({"model": "m", "messages": _messages(0), "max_tokens": 3000}).encode()
        leaving = socket.create_connection(server.server_address[:2])
        leaving.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        deadline = time.monotonic() + 60
        while not batcher._active and time.monotonic() < deadline:
            time.sleep(0.01)
        assert batcher._active, "the long request never started"
        answers: list = []
        staying = threading.Thread(target=lambda: answers.append(
            _post(url, {"model": "m", "messages": _messages(1), "max_tokens": 16, "logprobs": True})))
        staying.start()
        leaving.close()
        staying.join(120)
        status, reply = answers[0]
        alone = LocalPolicy(checkpoints[0], max_new_tokens=16).act(_messages(1))
        assert status == 200 and reply["choices"][0]["message"]["content"] == alone.text
        assert [e["logprob"] for e in reply["choices"][0]["logprobs"]["content"]] == pytest.approx(
            alone.token_logprobs, abs=1e-4)
        while batcher._active and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not batcher._active
        assert submitted[0].error == "the client went away" and len(submitted[0].ids) < 3000
    finally:
        server.shutdown()
        registry.close()
