"""bench/bench_ask.py's simulated person and its verdict, on the terminal env with the scripted policy (no model)."""
from types import SimpleNamespace

from bench.bench_ask import run_config, verdict


def test_the_person_answers_every_ask_as_the_simulated_annotators_do_and_counts_its_seconds():
    from agent.envs import make_env
    from agent.policies import make_policy

    args = SimpleNamespace(env="terminal", approve_s=3.0, edit_s=12.0)
    env = make_env("terminal")
    try:
        # the scripted policy gives no logprobs: unsure, so asked at any floor; its steps are the solver's: approved
        asked = run_config(make_policy("scripted", task="terminal-count"), env, ["terminal-count"], [1000, 1001], 0.5,
                           args)
        never = run_config(make_policy("scripted", task="terminal-count"), env, ["terminal-count"], [1000, 1001], 0.0,
                           args)
    finally:
        env.close()
    assert asked["success_rate"] == never["success_rate"] == 1.0
    assert asked["asked_share"] == 1.0 and asked["approved"] == asked["steps"] and asked["edited"] == 0
    assert asked["person_seconds"] == 3.0 * asked["steps"]
    assert never["asked"] == 0 and never["person_seconds"] == 0.0 and never["unasked_wrong"] == 0  # the solver is right


def test_a_floor_meets_the_target_within_5_points_and_half_the_person_seconds():
    def config(success, seconds):
        return {"success_rate": success, "person_seconds": seconds}

    results = {"none": config(0.4, 0), "floor 0.5": config(0.95, 50), "floor 0.7": config(0.99, 80),
               "full": config(1.0, 100)}
    assert verdict(results, [0.5, 0.7])["floors_meeting_target"] == [0.5]  # 0.7 costs 80 % of full's seconds
    results["floor 0.5"] = config(0.94, 50)
    assert verdict(results, [0.5, 0.7])["target_met"] is False
