"""Answer formats of real GUI agents (agent/formats): reading answers as the models write them,
render -> parse round trips, and malformed answers that must become void turns, never exceptions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ui_tars.action_parser import parse_action_to_structure_output

from agent.actions import DIRECTIONS, Action, Turn, parse_turn
from agent import formats
from agent.formats import FORMATS, check_format, parse, render
from agent.prompt import FORMAT_SYSTEM_PROMPTS, SYSTEM_PROMPT

W, H = 1280, 800  # the screenshot every hand-written example below was taken of

# UI-TARS-1.5 sees a 1280x800 screenshot after Qwen2.5-VL's smart_resize (factor 28):
#   height 800 / 28 = 28.57 -> 29 * 28 = 812;  width 1280 / 28 = 45.71 -> 46 * 28 = 1288;
#   1288 * 812 = 1,045,856 pixels, inside [100*28*28, 16384*28*28], so no further scaling.
# A model point (mx, my) is the screenshot pixel (mx * 1280 / 1288, my * 800 / 812), rounded half up.


def uitars(text: str) -> Turn:
    return parse(text, format="uitars", width=W, height=H)


def qwen(text: str) -> Turn:
    return parse(text, format="qwen-relative", width=W, height=H)


def opencua(text: str) -> Turn:
    return parse(text, format="pyautogui", width=W, height=H)


def tool_call(arguments: dict, before: str = "") -> str:
    return f'{before}<tool_call>\n{json.dumps({"name": "computer_use", "arguments": arguments})}\n</tool_call>'


def code(body: str, thought: str = "I act.", fence: str = "python") -> str:
    return f"## Thought\n{thought}\n\n## Action\nDo it.\n\n## Code\n```{fence}\n{body}\n```"


# ---------------------------------------------------------------- uitars


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # (644, 406): 644 * 1280 / 1288 = 640.0, 406 * 800 / 812 = 400.0
        ("Thought: The OK button is in the middle of the dialog.\n"
         "Action: click(start_box='<|box_start|>(644,406)<|box_end|>')", Action("click", {"x": 640, "y": 400})),
        # <point>322 203</point>: 322 * 1280 / 1288 = 320.0, 203 * 800 / 812 = 200.0
        ("Thought: Click the search field.\nAction: click(point='<point>322 203</point>')",
         Action("click", {"x": 320, "y": 200})),
        # (1000,100): 1000 * 0.99379 = 993.79 -> 994, 100 * 0.98522 = 98.52 -> 99
        ("Thought: Open the file twice.\nAction: left_double(start_box='<|box_start|>(1000,100)<|box_end|>')",
         Action("double_click", {"x": 994, "y": 99})),
        ("Thought: Context menu.\nAction: right_single(point='<point>644 406</point>')",
         Action("right_click", {"x": 640, "y": 400})),
        # start (100,200) -> (99.38, 197.04) -> (99, 197); end (900,600) -> (894.41, 591.13) -> (894, 591)
        ("Thought: Move the slider.\nAction: drag(start_box='<|box_start|>(100,200)<|box_end|>', "
         "end_box='<|box_start|>(900,600)<|box_end|>')", Action("drag", {"x1": 99, "y1": 197, "x2": 894, "y2": 591})),
        ("Thought: Same, in points.\nAction: drag(start_point='<point>100 200</point>', end_point='<point>900 600</point>')",
         Action("drag", {"x1": 99, "y1": 197, "x2": 894, "y2": 591})),
        ("Thought: Copy.\nAction: hotkey(key='ctrl c')", Action("hotkey", {"keys": "ctrl+c"})),
        # a trailing \n is UI-TARS's "submit": it stays in the text, the envs press Enter for it
        ("Thought: Search for it.\nAction: type(content='weather in Paris\\n')",
         Action("type", {"text": "weather in Paris\n"})),
        ("Thought: An unescaped quote, as the model often writes.\nAction: type(content='it's fine')",
         Action("type", {"text": "it's fine"})),
        ("Thought: Escaped.\nAction: type(content='say \\'hi\\' \\\\ bye')", Action("type", {"text": "say 'hi' \\ bye"})),
        # (644, 609): 640.0, 609 * 800 / 812 = 600.0
        ("Thought: More results below.\nAction: scroll(start_box='<|box_start|>(644,609)<|box_end|>', direction='down')",
         Action("scroll", {"x": 640, "y": 600, "direction": "down"})),
        ("Thought: Up.\nAction: scroll(point='<point>644 609</point>', direction='up')",
         Action("scroll", {"x": 640, "y": 600, "direction": "up"})),
        ("Thought: The page is loading.\nAction: wait()", Action("wait", {})),
        ("Thought: Done.\nAction: finished(content='The price is $12.')", Action("finished", {"answer": "The price is $12."})),
        ("Thought: Done.\nAction: finished()", Action("finished", {"answer": ""})),
        ("Thought: I need a password.\nAction: call_user()", Action("call_user", {"question": ""})),
        # a box means its centre (200, 300): 200 * 0.99379 = 198.76 -> 199, 300 * 0.98522 = 295.57 -> 296
        ("Thought: A box.\nAction: click(start_box='<|box_start|>(100,200,300,400)<|box_end|>')",
         Action("click", {"x": 199, "y": 296})),
        ("Thought: Old bbox tag.\nAction: click(start_box='<bbox>100 200 300 400</bbox>')",
         Action("click", {"x": 199, "y": 296})),
        # the far edge of the model's image is the last pixel: (1288, 812) -> (1280, 800) -> (1279, 799)
        ("Thought: Corner.\nAction: click(start_box='(1288,812)')", Action("click", {"x": 1279, "y": 799})),
    ],
)
def test_uitars_answers_as_the_model_writes_them(answer, expected):
    turn = uitars(answer)
    assert turn.void_reason is None
    assert turn.action == expected
    assert turn.raw == answer


def test_uitars_thought_prefixes():
    assert uitars("Thought: go on\nAction: wait()").thought == "go on"
    reflective = "Reflection: The click missed.\nAction_Summary: Click the icon again.\nAction: wait()"
    turn = uitars(reflective)
    assert turn.thought == "Reflection: The click missed.\nAction_Summary: Click the icon again."
    assert render(turn.thought, turn.action, format="uitars", width=W, height=H) == reflective
    assert uitars("Action_Summary: Just wait.\nAction: wait()").thought == "Action_Summary: Just wait."


@pytest.mark.parametrize(
    "answer",
    [
        "Thought: click ok\nAction: click(start_box='(644,406)')",
        "Thought: click ok\nAction: click(point='<point>100 700</point>')",
        "Thought: x\nAction: left_double(start_box='(5,6)')",
        "Thought: x\nAction: drag(start_box='(1,2)', end_box='(1200,700)')",
        "Thought: x\nAction: scroll(point='<point>333 444</point>', direction='left')",
    ],
)
def test_uitars_points_agree_with_the_ui_tars_package(answer):
    # ui-tars' own parser (box tokens already stripped, as it expects) gives fractions of the 1288x812
    # image; times the screenshot's size they are our pixels, within the half pixel of rounding
    ref = parse_action_to_structure_output(answer, 1000, H, W)[0]["action_inputs"]
    ours = uitars(answer).action.args
    for box, (kx, ky) in (("start_box", ("x", "y")), ("end_box", ("x2", "y2"))):
        if box in ref:
            fx, fy = json.loads(ref[box])[:2]
            kx, ky = ("x1", "y1") if "x1" in ours and box == "start_box" else (kx, ky)
            assert abs(ours[kx] - fx * W) <= 0.5 + 1e-9 and abs(ours[ky] - fy * H) <= 0.5 + 1e-9


def test_uitars_render_writes_box_tokens_on_the_resized_image():
    # (640, 400) -> 640 * 1288 / 1280 = 644, 400 * 812 / 800 = 406
    text = render("Click OK.", Action("click", {"x": 640, "y": 400}), format="uitars", width=W, height=H)
    assert text == "Thought: Click OK.\nAction: click(start_box='<|box_start|>(644,406)<|box_end|>')"
    assert render("Copy.", Action("hotkey", {"keys": "ctrl+c"}), format="uitars", width=W, height=H).endswith(
        "Action: hotkey(key='ctrl c')")
    typed = render("", Action("type", {"text": "it's\n"}), format="uitars", width=W, height=H)
    assert typed.endswith("Action: type(content='it\\'s\\n')")


# ---------------------------------------------------------------- qwen-relative


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # [500, 500] on the 0-1000 grid: 500 * 1280 / 1000 = 640, 500 * 800 / 1000 = 400
        (tool_call({"action": "left_click", "coordinate": [500, 500]}, "I will press Submit.\n"),
         Action("click", {"x": 640, "y": 400})),
        # [123, 456]: 123 * 1.28 = 157.44 -> 157, 456 * 0.8 = 364.8 -> 365
        (tool_call({"action": "double_click", "coordinate": [123, 456]}), Action("double_click", {"x": 157, "y": 365})),
        (tool_call({"action": "right_click", "coordinate": [250, 750]}), Action("right_click", {"x": 320, "y": 600})),
        # [1000, 1000] is the far edge: (1280, 800) -> the last pixel (1279, 799)
        (tool_call({"action": "left_click", "coordinate": [1000, 1000]}), Action("click", {"x": 1279, "y": 799})),
        (tool_call({"action": "left_click_drag", "start_coordinate": [100, 100], "coordinate": [500, 250]}),
         Action("drag", {"x1": 128, "y1": 80, "x2": 640, "y2": 200})),
        (tool_call({"action": "type", "text": "hello\n"}), Action("type", {"text": "hello\n"})),
        (tool_call({"action": "key", "keys": ["ctrl", "a"]}), Action("hotkey", {"keys": "ctrl+a"})),
        (tool_call({"action": "scroll", "coordinate": [500, 500], "pixels": -300}),
         Action("scroll", {"x": 640, "y": 400, "direction": "down"})),
        (tool_call({"action": "scroll", "pixels": 300}), Action("scroll", {"x": 640, "y": 400, "direction": "up"})),
        (tool_call({"action": "hscroll", "coordinate": [0, 0], "pixels": 200}),
         Action("scroll", {"x": 0, "y": 0, "direction": "right"})),
        (tool_call({"action": "wait", "time": 2}), Action("wait", {})),
        (tool_call({"action": "terminate", "status": "success"}), Action("finished", {"answer": ""})),
        (tool_call({"action": "terminate", "status": "failure"}), Action("finished", {"answer": "FAIL"})),
        (tool_call({"action": "answer", "text": "42"}), Action("finished", {"answer": "42"})),
        (tool_call({"action": "call_user", "text": "Which account?"}), Action("call_user", {"question": "Which account?"})),
        ('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [500, 500]}}\n</tool_call>',
         Action("click", {"x": 640, "y": 400})),
        # arguments passed as a JSON string, as some servers do
        ('<tool_call>{"name": "computer_use", "arguments": "{\\"action\\": \\"wait\\"}"}</tool_call>', Action("wait", {})),
        # the plain forms on the same grid
        ("click(250, 750)", Action("click", {"x": 320, "y": 600})),
        ("Thought: the box\nAction: click(x=250, y=750)", Action("click", {"x": 320, "y": 600})),
        ("Thought: UI-TARS-1.0 style\nAction: click(start_box='(250,750)')", Action("click", {"x": 320, "y": 600})),
        ("I look at the list.\nscroll(start_box='<|box_start|>(500,500)<|box_end|>', direction='down')",
         Action("scroll", {"x": 640, "y": 400, "direction": "down"})),
    ],
)
def test_qwen_relative_answers(answer, expected):
    turn = qwen(answer)
    assert turn.void_reason is None, turn.void_reason
    assert turn.action == expected


def test_qwen_thought_is_the_text_around_the_call_without_think_tags():
    answer = tool_call({"action": "wait"}, "<think>\nThe page is still loading.\n</think>\n")
    assert qwen(answer).thought == "The page is still loading."
    assert qwen(tool_call({"action": "wait"}, "Thought: Wait.\n")).thought == "Wait."


# ---------------------------------------------------------------- pyautogui (OpenCUA)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("pyautogui.click(x=640, y=400)", Action("click", {"x": 640, "y": 400})),
        ("pyautogui.click(640, 400)", Action("click", {"x": 640, "y": 400})),
        # 0-1 fractions: 0.5 * 1280 = 640, 0.25 * 800 = 200
        ("pyautogui.click(x=0.5, y=0.25)", Action("click", {"x": 640, "y": 200})),
        # integers 0 and 1 are pixels, not fractions
        ("pyautogui.click(x=1, y=1)", Action("click", {"x": 1, "y": 1})),
        ("pyautogui.click(x=10, y=20, clicks=2)", Action("double_click", {"x": 10, "y": 20})),
        ("pyautogui.click(x=10, y=20, button='right')", Action("right_click", {"x": 10, "y": 20})),
        ("pyautogui.doubleClick(x=10, y=20)", Action("double_click", {"x": 10, "y": 20})),
        ("pyautogui.rightClick(x=10, y=20)", Action("right_click", {"x": 10, "y": 20})),
        ("pyautogui.moveTo(100, 200)\npyautogui.dragTo(300, 400, duration=0.5)",
         Action("drag", {"x1": 100, "y1": 200, "x2": 300, "y2": 400})),
        ("pyautogui.moveTo(100, 200)\npyautogui.click()", Action("click", {"x": 100, "y": 200})),
        ("pyautogui.write(message='hello world')", Action("type", {"text": "hello world"})),
        ("pyautogui.typewrite('hi', interval=0.05)", Action("type", {"text": "hi"})),
        ("pyautogui.write('query')\npyautogui.press('enter')", Action("type", {"text": "query\n"})),
        ("pyautogui.press('enter')", Action("hotkey", {"keys": "enter"})),
        ("pyautogui.hotkey('ctrl', 'c')", Action("hotkey", {"keys": "ctrl+c"})),
        ("pyautogui.hotkey(['ctrl', 'shift', 't'])", Action("hotkey", {"keys": "ctrl+shift+t"})),
        ("pyautogui.scroll(-5)", Action("scroll", {"x": 640, "y": 400, "direction": "down"})),
        ("pyautogui.scroll(3, x=10, y=20)", Action("scroll", {"x": 10, "y": 20, "direction": "up"})),
        ("pyautogui.hscroll(-2, x=10, y=20)", Action("scroll", {"x": 10, "y": 20, "direction": "left"})),
        ("import pyautogui\npyautogui.click(3, 4)", Action("click", {"x": 3, "y": 4})),
        ("computer.wait(seconds=3)", Action("wait", {})),
        ("computer.terminate(status='success')", Action("finished", {"answer": ""})),
        ("computer.terminate(status='success', answer='42')", Action("finished", {"answer": "42"})),
        ("computer.terminate(status='failure')", Action("finished", {"answer": "FAIL"})),
        ("computer.call_user(question='Which file?')", Action("call_user", {"question": "Which file?"})),
    ],
)
def test_opencua_code(body, expected):
    turn = opencua(code(body, "The field is empty."))
    assert turn.void_reason is None, turn.void_reason
    assert turn.action == expected
    assert turn.thought == "The field is empty."


def test_opencua_sections_and_fences():
    answer = ("## Thought\nThe dialog asks to confirm.\n\n## Action\nClick 'Yes'.\n\n## Code\n"
              "```code\ncomputer.terminate(status='success')\n```")
    assert opencua(answer).thought == "The dialog asks to confirm."
    plain = "Thought:\nI should wait.\nAction:\nWait.\n```python\ncomputer.wait()\n```"
    assert opencua(plain).thought == "I should wait."  # OpenCUA's v1 labels are sections too
    assert opencua("## Code\npyautogui.click(5, 6)").action == Action("click", {"x": 5, "y": 6})


# ---------------------------------------------------------------- malformed answers: void, never raises

MALFORMED = [
    # (format, answer, a word the reason must contain)
    ("uitars", "", "empty"),
    ("uitars", "   \n", "empty"),
    ("uitars", "Thought: I will click the button", "Action"),
    ("uitars", "Thought: x\nAction: click(start_box='<|box_start|>(644,", "cut off"),
    ("uitars", "Thought: x\nAction: click(start_box='(644,406)'", "cut off"),
    ("uitars", "Thought: x\nAction: teleport(start_box='(1,2)')", "unknown action"),
    ("uitars", "Thought: x\nAction: click(start_box='(1300,100)')", "outside"),
    ("uitars", "Thought: x\nAction: click(start_box='(-5,100)')", "outside"),
    ("uitars", "Thought: x\nAction: click(start_box='(99999999999999999999,1)')", "too long"),
    ("uitars", "Thought: x\nAction: click(start_box='(nan,3)')", "not a number"),
    ("uitars", "Thought: x\nAction: click(start_box=point(1,2))", "expected"),
    ("uitars", "Thought: x\nAction: click(start_box='(1,2)')\n\nclick(start_box='(3,4)')", "one action"),
    ("uitars", "Thought: x\nAction: click()", "point"),
    ("uitars", "Thought: x\nAction: scroll(start_box='(1,2)')", "direction"),
    ("uitars", "Thought: x\nAction: scroll(start_box='(1,2)', direction='sideways')", "direction"),
    ("uitars", "Thought: x\nAction: type(content='')", "text"),
    ("uitars", "Thought: x\nAction: click(start_box='(1,2)', force=1)", "unexpected"),
    ("qwen-relative", "", "empty"),
    ("qwen-relative", '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_cl', "not closed"),
    ("qwen-relative", '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [5,'
                      "</tool_call>", "JSON"),
    ("qwen-relative", tool_call({"action": "teleport", "coordinate": [1, 2]}), "unknown"),
    ("qwen-relative", tool_call({"action": "mouse_move", "coordinate": [1, 2]}), "no Loupe action"),
    ("qwen-relative", tool_call({"action": "triple_click", "coordinate": [1, 2]}), "no Loupe action"),
    ("qwen-relative", tool_call({"action": "left_click", "coordinate": [1001, 5]}), "outside"),
    ("qwen-relative", tool_call({"action": "left_click", "coordinate": [5]}), "[x, y]"),
    ("qwen-relative", tool_call({"action": "left_click_drag", "coordinate": [5, 5]}), "start_coordinate"),
    ("qwen-relative", tool_call({"action": "scroll", "pixels": 0}), "nothing"),
    ("qwen-relative", '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", '
                      '"coordinate": [NaN, 3]}}</tool_call>', "finite"),
    ("qwen-relative", '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", '
                      '"coordinate": [1e400, 3]}}</tool_call>', "finite"),
    ("qwen-relative", '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", '
                      '"coordinate": [' + "9" * 400 + ', 3]}}</tool_call>', "too large"),
    ("qwen-relative", '<tool_call>{"name": "web_search", "arguments": {}}</tool_call>', "computer_use"),
    ("qwen-relative", tool_call({"action": "wait"}) + tool_call({"action": "wait"}), "2 tool calls"),
    ("qwen-relative", "<tool_call>" + "[" * 50_000 + "</tool_call>", "JSON"),
    ("qwen-relative", "I am not sure what to do.", "no <tool_call>"),
    ("qwen-relative", "x" * 100_001, "characters long"),
    ("pyautogui", "", "empty"),
    ("pyautogui", "## Thought\nI will click.", "code block"),
    ("pyautogui", "## Code\n```python\npyautogui.click(x=1", "not closed"),
    ("pyautogui", code("pyautogui.click(x=1"), "not valid Python"),
    ("pyautogui", code("import os\nos.system('rm -rf /')"), "imports os"),
    ("pyautogui", code("from os import system"), "imports os"),
    ("pyautogui", code("__import__('os').system('id')"), "only calls"),
    ("pyautogui", code("os.system('id')"), "not an action"),
    ("pyautogui", code("x = 5\npyautogui.click(x, 5)"), "only calls"),
    ("pyautogui", code("pyautogui.click(x=int('5'), y=3)"), "plain values"),
    ("pyautogui", code("pyautogui.click(x=pyautogui.size()[0], y=3)"), "plain values"),
    ("pyautogui", code("pyautogui.click(x=10**100, y=3)"), "plain values"),
    ("pyautogui", code("pyautogui.click(x=" + "9" * 300 + ", y=3)"), "too large"),
    ("pyautogui", code("pyautogui.click(x=" + "9" * 5000 + ", y=3)"), "characters long"),
    ("pyautogui", code("pyautogui.click(x=1e999, y=3)"), "finite"),
    ("pyautogui", code("pyautogui.click(x=float('nan'), y=3)"), "plain values"),
    ("pyautogui", code("pyautogui.click(x=nan, y=3)"), "plain values"),
    ("pyautogui", code("pyautogui.click(x=5000, y=3)"), "outside"),
    ("pyautogui", code("pyautogui.click(x=-1, y=3)"), "outside"),
    ("pyautogui", code("pyautogui.click(**{'x': 1, 'y': 2})"), "**"),
    ("pyautogui", code("pyautogui.click(1, 2, x=3)"), "repeated"),
    ("pyautogui", code("pyautogui.teleport(1, 2)"), "not an action"),
    ("pyautogui", code("pyautogui.tripleClick(1, 2)"), "triple"),
    ("pyautogui", code("pyautogui.click(1, 2)\npyautogui.click(3, 4)"), "one action"),
    ("pyautogui", code("pyautogui.moveTo(1, 2)"), "nothing"),
    ("pyautogui", code("pyautogui.dragTo(1, 2)"), "moveTo"),
    ("pyautogui", code("pyautogui.click()"), "unknown"),
    ("pyautogui", code("pyautogui.press(['a', 'b'])"), "one after another"),
    ("pyautogui", code("(" * 300), "not valid Python"),
    ("pyautogui", code("pyautogui.click(" * 1000), "characters long"),
]


@pytest.mark.parametrize(("fmt", "answer", "word"), MALFORMED)
def test_malformed_answers_are_void_turns_with_a_reason(fmt, answer, word):
    turn = parse(answer, format=fmt, width=W, height=H)
    assert turn.is_void and turn.action is None
    assert word.lower() in turn.void_reason.lower(), turn.void_reason
    assert turn.raw == answer


def test_void_turn_keeps_the_thought():
    turn = uitars("Thought: The menu is open.\nAction: teleport()")
    assert turn.is_void and turn.thought == "The menu is open."


@pytest.mark.parametrize("fmt", FORMATS)
def test_bad_input_types_and_sizes_are_void(fmt):
    assert parse(None, format=fmt, width=W, height=H).is_void
    assert parse(b"click", format=fmt, width=W, height=H).is_void
    if fmt != "loupe":  # Loupe's grammar has no coordinate space to check
        for w, h in ((0, 800), (1280, -1), (12.5, 800), (True, 800)):
            turn = parse("Thought: x\nAction: wait()", format=fmt, width=w, height=h)
            assert turn.is_void and "screenshot" in turn.void_reason


def test_unknown_format_is_a_void_turn_in_parse_and_an_error_elsewhere():
    turn = parse("Action: wait()", format="claude", width=W, height=H)
    assert turn.is_void and "unknown answer format 'claude'" in turn.void_reason
    with pytest.raises(ValueError, match="unknown answer format 'claude'; expected one of: loupe, uitars"):
        render("x", Action("wait", {}), format="claude", width=W, height=H)
    with pytest.raises(ValueError, match="unknown answer format"):
        check_format("UI-TARS")
    assert check_format("uitars") == "uitars"


def test_loupe_format_is_the_existing_grammar():
    for text in ("Thought: ok\nAction: click(x=3, y=4)", "Action: teleport()", "nothing"):
        assert parse(text, format="loupe", width=W, height=H) == parse_turn(text)
    action = Action("type", {"text": 'say "hi"'})
    assert render("t", action, format="loupe", width=W, height=H) == 'Thought: t\nAction: type(text="say \\"hi\\"")'


def test_render_refuses_points_off_the_screenshot():
    for fmt in ("uitars", "qwen-relative", "pyautogui"):
        with pytest.raises(ValueError, match="outside the 1280x800 screenshot"):
            render("x", Action("click", {"x": 1280, "y": 10}), format=fmt, width=W, height=H)


@pytest.mark.parametrize("fmt", FORMATS)
def test_render_without_an_action_writes_the_thought_alone(fmt):
    text = render("  I am lost.  ", None, format=fmt, width=W, height=H)
    turn = parse(text, format=fmt, width=W, height=H)
    assert turn.is_void and turn.thought == "I am lost."


@settings(max_examples=300, deadline=None)
@given(fmt=st.sampled_from(FORMATS), text=st.text(max_size=300))
def test_parse_never_raises_on_any_text(fmt, text):
    turn = parse(text, format=fmt, width=W, height=H)
    assert isinstance(turn, Turn) and (turn.action is None) == (turn.void_reason is not None)


# ---------------------------------------------------------------- render -> parse round trips

_THOUGHT = st.text(alphabet="abcdefghij XYZ.,!?'\"\n", max_size=60).filter(
    lambda t: all(line.strip().lower().rstrip(":") not in ("thought", "action", "code") for line in t.split("\n")))
_KEYS = st.lists(st.sampled_from(["ctrl", "shift", "alt", "a", "c", "enter", "tab", "Meta", "f5"]), min_size=1, max_size=3)


@st.composite
def _case(draw):
    fmt = draw(st.sampled_from(FORMATS))
    width, height = draw(st.integers(100, 2000)), draw(st.integers(100, 2000))
    x, y = st.integers(0, width - 1), st.integers(0, height - 1)
    text = st.text(max_size=40)
    action = draw(st.one_of(
        st.builds(lambda n, a, b: Action(n, {"x": a, "y": b}), st.sampled_from(["click", "double_click", "right_click"]), x, y),
        st.builds(lambda a, b, c, d: Action("drag", {"x1": a, "y1": b, "x2": c, "y2": d}), x, y, x, y),
        st.builds(lambda t: Action("type", {"text": t}), st.text(min_size=1, max_size=40)),
        st.builds(lambda k: Action("hotkey", {"keys": "+".join(k)}), _KEYS),
        st.builds(lambda a, b, d: Action("scroll", {"x": a, "y": b, "direction": d}), x, y, st.sampled_from(DIRECTIONS)),
        st.just(Action("wait", {})),
        st.builds(lambda t: Action("finished", {"answer": t}), st.one_of(text, st.just("FAIL"))),
        st.builds(lambda t: Action("call_user", {"question": t}), text),
    ))
    return fmt, width, height, draw(_THOUGHT), action


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_render_then_parse_gives_the_action_back(case):
    fmt, width, height, thought, action = case
    text = render(thought, action, format=fmt, width=width, height=height)
    turn = parse(text, format=fmt, width=width, height=height)
    assert turn.void_reason is None, (text, turn.void_reason)
    assert turn.thought == thought.strip()
    assert turn.action.name == action.name
    for key, value in action.args.items():
        if isinstance(value, int):  # a coordinate: the model's grid is no coarser than 2 pixels here
            assert abs(turn.action.args[key] - value) <= 1, (key, text)
        else:
            assert turn.action.args[key] == value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_every_cut_off_answer_is_read_or_void_never_raises(case):
    fmt, width, height, thought, action = case
    assume(fmt != "loupe")
    text = render(thought, action, format=fmt, width=width, height=height)
    for end in range(len(text)):
        turn = parse(text[:end], format=fmt, width=width, height=height)
        assert (turn.action is None) == (turn.void_reason is not None)


def test_round_trip_is_exact_where_the_grid_is_finer_than_pixels():
    # UI-TARS sees a 1280x800 screenshot as 1288x812, finer than the screenshot: every pixel comes back
    for x, y in ((0, 0), (1, 1), (639, 399), (1279, 799)):
        action = Action("click", {"x": x, "y": y})
        assert uitars(render("", action, format="uitars", width=W, height=H)).action == action


# ---------------------------------------------------------------- system prompts, imports


def test_each_format_has_a_system_prompt_that_shows_its_syntax():
    assert set(FORMAT_SYSTEM_PROMPTS) == set(FORMATS)
    assert FORMAT_SYSTEM_PROMPTS["loupe"] == SYSTEM_PROMPT
    assert "click(start_box='<|box_start|>(x1,y1)<|box_end|>')" in FORMAT_SYSTEM_PROMPTS["uitars"]
    assert "<tool_call>" in FORMAT_SYSTEM_PROMPTS["qwen-relative"]
    assert "1000x1000" in FORMAT_SYSTEM_PROMPTS["qwen-relative"]
    assert "## Code" in FORMAT_SYSTEM_PROMPTS["pyautogui"]


def test_formats_import_nothing_heavy():
    code_ = "import agent.formats, json, sys; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code_], cwd=root, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not loaded & {"django", "torch", "transformers", "playwright", "flywheel", "trainer"}


def test_uitars_points_are_on_the_served_processors_grid(tmp_path):
    """Issue 36: the grid of a 160x210 MiniWoB screen is 252x336 at the ui-tars package's minimum (78,400 pixels),
    but a processor with Qwen2.5-VL's minimum (3,136) shows the model 168x224: its (84, 112) is the screen's (80, 105),
    not (53, 70). At 1280x800 both limits give the same grid."""
    answer = "Action: click(start_box='(84,112)')"
    qwen = {"min_pixels": 3136, "max_pixels": 12845056}
    turn = formats.parse(answer, format="uitars", width=160, height=210, **qwen)
    assert (turn.action.args["x"], turn.action.args["y"]) == (80, 105)
    default = formats.parse(answer, format="uitars", width=160, height=210)
    assert (default.action.args["x"], default.action.args["y"]) == (53, 70)
    click = Action("click", {"x": 80, "y": 105})
    assert "(84,112)" in formats.render("", click, format="uitars", width=160, height=210, **qwen)
    wide = "Action: click(start_box='(644,406)')"
    assert formats.parse(wide, format="uitars", width=1280, height=800, **qwen).action == \
        formats.parse(wide, format="uitars", width=1280, height=800).action
    # formats on their own grids take the limits and ignore them
    assert formats.parse("Action: click(500, 500)", format="qwen-relative", width=160, height=210, **qwen).action == \
        Action("click", {"x": 80, "y": 105})
    # bad limits: a void turn saying why (parse never raises), a ValueError from render
    for bad, why in (({"min_pixels": 0}, "min_pixels must be a positive whole number"),
                     ({"min_pixels": 5000, "max_pixels": 4000}, "min_pixels 5000 is more than max_pixels 4000")):
        assert why in formats.parse(answer, format="uitars", width=160, height=210, **bad).void_reason
        with pytest.raises(ValueError, match=why):
            formats.render("", click, format="uitars", width=160, height=210, **bad)
    # the limits of a checkpoint dir: a hub checkpoint's preprocessor_config.json, transformers 5's processor_config
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "preprocessor_config.json").write_text(json.dumps(qwen))
    assert formats.pixel_limits(tmp_path / "hub") == qwen
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "processor_config.json").write_text(json.dumps(
        {"image_processor": {"size": {"shortest_edge": 3136, "longest_edge": 200704}}}))
    assert formats.pixel_limits(tmp_path / "saved") == {"min_pixels": 3136, "max_pixels": 200704}
    assert formats.pixel_limits(tmp_path / "none") == {"min_pixels": None, "max_pixels": None}
