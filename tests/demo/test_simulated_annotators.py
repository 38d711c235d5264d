"""The flywheel demonstration's figures (demo/simulated_annotators.py): success on the old tasks apart from the new
ones, weighted by episodes (the demonstration itself is tests/cycles/test_cycles_demo.py, `make flywheel`)."""
import pytest

from demo.simulated_annotators import TRAIN_SEEDS, cycle_figures, episode_shares, group_success, train_seeds


def _evaluation(rates: dict[str, tuple[int, float]]) -> dict:
    episodes = sum(n for n, _ in rates.values())
    return {"success_rate": sum(n * r for n, r in rates.values()) / episodes, "episodes": episodes,
            "per_task": {t: {"episodes": n, "success_rate": r} for t, (n, r) in rates.items()}}


def test_success_is_split_between_old_and_new_tasks_by_episodes():
    evaluation = _evaluation({"click-button": (20, 1.0), "click-link": (20, 0.9), "click-tab": (20, 0.25),
                              "shop-add-earbuds": (1, 1.0)})
    split = group_success(evaluation, {"old": ("click-button", "click-link", "focus-text"),
                                       "new": ("click-tab", "shop-add-earbuds"), "none": ("click-dialog",)})
    assert split["all"] == evaluation["success_rate"]
    assert split["old"] == 0.95 and split["new"] == 6 / 21 and split["none"] is None
    assert group_success({}, {"old": ("click-button",)}) == {"all": None, "old": None}


def test_a_cycles_figures_carry_both_evaluations_split_and_per_task():
    cycle = {"iteration": 2, "state": "deployed", "decision": "promote", "timings": {"train": {"seconds": 30.0}},
             "snapshots": [{"kind": "sft", "rows": 40, "status": "ready"}],
             "evaluations": [{"role": "deployed", **_evaluation({"click-button": (10, 1.0), "click-tab": (10, 0.0)})},
                             {"role": "candidate", **_evaluation({"click-button": (10, 0.9), "click-tab": (10, 0.6)})}]}
    figures = cycle_figures(cycle, [], 12.0, {"old": ["click-button"], "new": ["click-tab"]})
    assert figures["before"] == {"all": 0.5, "old": 1.0, "new": 0.0}
    assert figures["after"] == {"all": 0.75, "old": 0.9, "new": 0.6}
    assert figures["per_task_before"] == {"click-button": 1.0, "click-tab": 0.0}
    assert (figures["success_before"], figures["success_after"], figures["cycle_seconds"]) == (0.5, 0.75, 30.0)


def test_a_takeover_quotes_the_clicked_line_once_the_checkpoint_is_known_to_quote():
    """A void proposal shows no convention; the person who has seen the checkpoint quote lines writes its own thought
    the same way (its rows would teach another convention otherwise), and one who has not keeps the solver's."""
    from agent.actions import Action, Turn
    from agent.envs.base import Element, Observation
    from demo.simulated_annotators import corrected_thought

    close = Element(role="button", text="x", x=120, y=102, width=12, height=12)
    observation = Observation(instruction="Close the dialog box by clicking the \"x\".", url="/x.html", screenshot=b"",
                              elements=[close], width=160, height=210)
    solver = Turn(thought="The dialog's x is its Close button; I click it.", action=Action("click", {"x": 120, "y": 102}),
                  void_reason=None, raw="")
    assert corrected_thought("", solver, observation, "named") == solver.thought
    quoted = corrected_thought("", solver, observation, "named", quotes=True)
    assert quoted.startswith(solver.thought) and quoted.endswith('[button] "x" x=120, y=102'), quoted


def test_an_address_where_nothing_answers_is_said_plainly():
    import socket

    import pytest

    from demo.simulated_annotators import Api, ApiFailure

    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(ApiFailure, match=rf"cannot reach Loupe at http://127.0.0.1:{port} .*is it running"):
        Api(f"http://127.0.0.1:{port}", "manager", "secret")


OLD = ("click-button", "click-link", "focus-text")
NEW = ("click-dialog", "click-tab", "click-option", "enter-text")


@pytest.mark.parametrize("total", [7, 8, 13, 24, 30, 31])
def test_episode_shares_give_new_tasks_three_times_the_known_ones_and_sum_to_the_total(total):
    shares = episode_shares(total, (*OLD, *NEW), OLD)
    assert sum(shares.values()) == total and list(shares) == [*OLD, *NEW]
    assert min(shares.values()) >= 1
    assert min(shares[t] for t in NEW) >= max(shares[t] for t in OLD)
    if total == 30:
        assert shares == {**dict.fromkeys(OLD, 2), **dict.fromkeys(NEW, 6)}


def test_fewer_episodes_than_tasks_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="fewer than the 7 tasks"):
        episode_shares(6, (*OLD, *NEW), OLD)


def test_in_turn_goes_round_the_tasks_from_where_the_last_cycle_stopped():
    from demo.simulated_annotators import in_turn

    products = ["speaker", "headphones", "radio", "turntable"]
    cycles = [in_turn(products, n, 2) for n in range(3)]
    assert cycles == [["speaker", "headphones"], ["radio", "turntable"], ["speaker", "headphones"]]
    assert in_turn(products, 1, 3) == ["turntable", "speaker", "headphones"]
    assert in_turn(["one"], 5, 2) == ["one", "one"]


def test_every_demonstration_run_annotates_train_seeds_of_its_own_within_the_tasks_range():
    """LOUPE_DEMO_SEED=5 asked for seeds from 110000, past the train tasks' 99999, and the bench stopped on the API's
    400; runs 0-4 keep the seeds they had."""
    low, high = TRAIN_SEEDS
    assert [train_seeds(run, 0, 1)[0] for run in range(5)] == [10_000, 30_000, 50_000, 70_000, 90_000]
    taken: dict[int, int] = {}
    for run in range(34):
        for cycle in range(3):
            for seed in train_seeds(run, cycle, 40):
                assert low <= seed <= high, (run, cycle, seed)
                assert taken.setdefault(seed, run) == run, f"runs {taken[seed]} and {run} both annotate seed {seed}"
    assert all(low <= seed <= high for seed in train_seeds(7, 40, 2_000))  # many cycles wrap round, never out


def test_a_thought_fits_its_click_only_when_the_last_line_it_quotes_is_the_one_clicked():
    """Approvals a flywheel run's cycle 1 trained on: the click went into the text field while the thought quoted the
    Submit button. The simulated person edits such a step (its right action, the thought fixed) instead of approving it."""
    from demo.simulated_annotators import thought_fits

    click = {"name": "click", "args": {"x": 66, "y": 68}}
    assert not thought_fits('I click into the text field to enter it; I click into the button to click it. '
                            '[button] "Submit" x=50, y=108', click)
    assert thought_fits('I click into the text field. [textbox] "" x=66, y=68', click)
    # the last quoted line is the one the click copies
    assert thought_fits('Not [button] "Submit" x=50, y=108 but [textbox] "" x=66, y=68', click)
    assert not thought_fits('[textbox] "" x=66, y=68 then [button] "Submit" x=50, y=108', click)
    assert thought_fits("I click into the text field.", click)  # no quote: nothing to compare
    assert thought_fits('I type it. [textbox] "" x=66, y=68', {"name": "type", "args": {"text": "Karrie"}})
    assert thought_fits('[link] "say \\"hi\\"" x=66, y=68', click)
