"""The benches' SVG line chart (bench/chart.py): axes a person can read, whatever the scale of the numbers."""
import re

from bench.chart import line_chart_svg, ticks


def test_ticks_are_round_steps_labelled_with_the_decimals_the_step_needs():
    assert ticks(0, 1)[1] == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]  # a rate: not 0, 0, 0, 1, 1, 1
    assert ticks(0, 3)[1] == ["0", "1", "2", "3"]  # cycles: not 0, 1, 1, 2, 2, 3
    assert ticks(0, 2, integers=True)[1] == ["0", "1", "2"] and ticks(0, 2)[1] == ["0.0", "0.5", "1.0", "1.5", "2.0"]
    assert ticks(0, 96.5)[1] == ["0", "20", "40", "60", "80", "100"]
    assert ticks(0, 1234)[1] == ["0", "250", "500", "750", "1000", "1250"]
    values, _ = ticks(0, 57.3)
    assert values[0] <= 0 and values[-1] >= 57.3


def test_a_chart_of_rates_over_cycles_shows_its_ticks_legend_and_points():
    svg = line_chart_svg({"deployed, all tasks": [(0, 0.62), (1, 0.73), (2, 0.82)], "candidate": [(1, 0.73)]},
                         title="Flywheel", x_label="cycle", y_label="success")
    labels = re.findall(r'text-anchor="(?:end|middle)">([^<]*)</text>', svg)
    assert labels[:6] == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]  # the rates
    assert labels[6:9] == ["0", "1", "2"]  # the cycles: no cycle 0.5
    assert "deployed, all tasks" in svg and "candidate" in svg
    assert svg.count("<circle") == 4  # the lone candidate point too
