"""The flywheel demonstration's figures (flywheel/simulated_annotators.py): success on the old tasks apart from the new
ones, weighted by episodes (the demonstration itself is tests/flywheel/test_cycles_demo.py, `make flywheel`)."""
from flywheel.simulated_annotators import cycle_figures, group_success


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
