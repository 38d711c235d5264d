"""core/redaction.py on the test set (tests/core/pii_set.py): every kind caught in text, in JSON rows, in a
screenshot (pixels inside the matching element's box) and in speech; the near-misses left alone; bad settings
refused with what to change."""
import io

import numpy as np
import pytest
from PIL import Image

from core import redaction
from core.errors import ApplicationError
from tests.core.pii_set import NEAR_MISSES, SETTINGS, VALUES, screen_with

POLICY = redaction.policy_of(SETTINGS)


@pytest.mark.parametrize("kind", list(VALUES))
def test_each_kind_in_a_sentence_is_replaced_by_its_label(kind):
    value, sentence = VALUES[kind]
    redacted = redaction.text_redact(sentence, POLICY)
    assert value not in redacted
    label = {"secret_entropy": "secret"}.get(kind, "national_id" if kind.startswith("national_id") else kind)
    assert f"[{label.upper()}]" in redacted
    assert redacted.replace(f"[{label.upper()}]", value) == sentence  # nothing else touched


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_a_near_miss_is_left_alone(text):
    assert redaction.text_redact(text, POLICY) == text


def test_the_project_word_list_and_patterns_apply_only_where_set():
    value, sentence = VALUES["name"]
    assert redaction.text_redact(sentence) == sentence  # the default policy knows no names
    assert value not in redaction.text_redact(sentence, POLICY)


def test_a_policy_switched_off_changes_nothing():
    policy = redaction.policy_of({"redaction": {"enabled": False}})
    sentence = VALUES["email"][1]
    assert redaction.text_redact(sentence, policy) == sentence
    assert policy.digest != redaction.DEFAULT.digest


@pytest.mark.parametrize("line, kept", [
    ('[textbox] "Questions about your payment? Write to jane.doe+bil..." at (80, 20)', "Write to "),
    ('[text] "Card number 4111 1111 11..." x=200, y=105', "Card number 4111 1111 "),
    ('[text] "Assigned to Margaret Hami..." x=1, y=2', "Assigned to "),
])
def test_the_word_cut_short_in_a_prompt_line_is_redacted_and_a_listed_names_start_before_it(line, kept):
    redacted = redaction.text_redact(line, POLICY)
    assert kept + '[CUT]..."' in redacted and redacted.endswith(line.rsplit('..."', 1)[1]), redacted


def test_rows_are_redacted_in_every_string_but_their_image_paths():
    image = "images/ab/ab54f3a9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8.jpg"
    rows = [{"messages": [{"role": "user", "content": [{"type": "text", "text": VALUES["phone"][1]}]},
                          {"role": "assistant", "content": 'Thought: mail them\nAction: type(text="'
                                                           f'{VALUES["email"][0]}")'}],
             "image": image, "meta": {"episode": 3, "comment": VALUES["card"][1]}}]
    out = redaction.rows_redact(rows, {"redaction": redaction.snapshot_record(SETTINGS)}, SETTINGS)
    text = repr(out)
    for kind in ("phone", "email", "card"):
        assert VALUES[kind][0] not in text
    assert out[0]["image"] == image and out[0]["meta"]["episode"] == 3


def test_a_screenshot_is_filled_black_inside_each_matching_elements_box_only():
    data, elements = screen_with([VALUES["email"][1], "Nothing private here", VALUES["card"][1]])
    boxes = redaction.element_boxes(elements, POLICY)
    assert len(boxes) == 2
    pixels = np.asarray(Image.open(io.BytesIO(redaction.image_redact(data, boxes))).convert("L")).astype(int)
    for top in (10, 90):  # the email's and the card's boxes: black, every pixel (JPEG noise aside)
        assert pixels[top:top + 31, 10:391].max() < 24
    assert pixels[50:81, 10:391].mean() > 150  # the element with nothing private keeps its grey
    assert pixels[200:, :].min() > 230  # and the page around stays white


def test_an_element_with_no_size_gives_no_box():
    assert redaction.element_boxes([{"text": VALUES["email"][1], "x": 5, "y": 5, "width": 0, "height": 0}]) == []


def test_spoken_words_of_a_number_are_found_and_silenced():
    words = [("Call", 0.0, 0.3), ("me", 0.3, 0.5), ("on", 0.5, 0.7), ("(415)", 0.8, 1.4), ("555-2671", 1.4, 2.2),
             ("please.", 2.3, 2.8)]
    spans = redaction.word_spans(words, POLICY)
    assert spans == [(3, "phone"), (4, "phone")]
    rate = 16_000
    pcm = np.ones(3 * rate, dtype=np.float32)
    silenced = redaction.pcm_silence(pcm, rate, [(words[p][1], words[p][2]) for p, _ in spans])
    assert not silenced[int(0.8 * rate):int(2.2 * rate)].any()
    assert silenced[:int(0.7 * rate)].all() and silenced[int(2.3 * rate):].all()
    assert pcm.all()  # the input is left as it was


@pytest.mark.parametrize("raw, says", [
    ({"kinds": ["email", "dna"]}, "kinds must be a list of"),
    ({"patterns": [["customer", "CUST-("]]}, "is not a regular expression"),
    ({"patterns": [["anything", ".*"]]}, "matches empty text"),
    ({"patterns": [["Bad Name", "x"]]}, "lower case"),
    ({"words": ["", "Ann"]}, "non-empty"),
    ({"region": "usa"}, "two-letter"),
    ({"enabled": "yes"}, "true or false"),
    ({"colour": "red"}, "Unknown redaction settings: colour"),
])
def test_bad_settings_are_refused_with_what_to_change(raw, says):
    with pytest.raises(ApplicationError) as caught:
        redaction.policy_clean(raw)
    assert says in caught.value.message


@pytest.mark.parametrize("kind", list(VALUES))
def test_each_kind_said_aloud_is_found_in_the_transcripts_words_and_silenced(kind):
    """The sentence as a transcript's words (one a second): the words of the value, and only those, are found and
    silenced in the audio."""
    value, sentence = VALUES[kind]
    words = [(word, float(i), i + 0.8) for i, word in enumerate(sentence.split())]
    spans = redaction.word_spans(words, POLICY)
    found = " ".join(words[p][0] for p, _ in spans)
    assert found.strip("()") == value.strip("()") or value in found, (found, value)
    rate = 100
    silenced = redaction.pcm_silence(np.ones(len(words) * rate, dtype=np.float32), rate,
                                     [(words[p][1], words[p][2]) for p, _ in spans], pad_s=0)
    for position, (_, start, end) in enumerate(words):
        heard = silenced[int(start * rate):int(end * rate)]
        assert (not heard.any()) if position in {p for p, _ in spans} else heard.all(), words[position]


@pytest.mark.parametrize("line", [
    'Actions: click(x=, y=), type(text="..."), hotkey(keys="ctrl+a"), call_user(question="...")',
    'Thought: it still says "Loading..." so I wait\nAction: type(text="Please hold...")',
])
def test_three_dots_outside_an_elements_line_are_no_cut_word(line):
    assert redaction.text_redact(line, POLICY) == line
