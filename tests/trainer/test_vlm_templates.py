"""Assistant-only loss against a real checkpoint's chat template (issue 36), not TRL's own copy: Qwen2.5-VL-7B-
Instruct's template as its hub dir ships it (tests/trainer/fixtures/README.md says where it comes from) is one TRL
marks; its marked copy renders the very text the model reads, and the mask covers the answers alone; it survives
Loupe's checkpoint save. A template TRL does not ship is refused before training, saying what to do (the fallback:
put {% generation %} marks in the dir's template), and then trains on the answers alone too."""

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image
from trl.chat_template_utils import get_training_chat_template, has_generation_markers

from trainer.data import TrainerError
from trainer.tiny_vlm import load_processor, save_tiny_vlm
from trainer.vlm import check_chat_template

QWEN25_VL = (Path(__file__).parent / "fixtures" / "qwen2_5_vl_7b_instruct.chat_template.jinja").read_text()
ANSWERS = ["Thought: OK.\nAction: click(start_box='(1,2)')", "Thought: done.\nAction: finished(content='')"]


def conversation() -> list[dict]:
    image = Image.new("RGB", (56, 56), "white")
    return [{"role": "system", "content": [{"type": "text", "text": "You are a GUI agent."}]},
            {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Click OK"}]},
            {"role": "assistant", "content": [{"type": "text", "text": ANSWERS[0]}]},
            {"role": "user", "content": [{"type": "text", "text": "Next"}]},
            {"role": "assistant", "content": [{"type": "text", "text": ANSWERS[1]}]}]


def trained_text(processor, template: str) -> str:
    """What the answer-only loss trains on: the tokens the template's marks put in the assistant mask."""
    out = processor.apply_chat_template(conversation(), chat_template=template, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"][0], out["assistant_masks"][0]
    return processor.tokenizer.decode([token for token, on in zip(ids, mask) if on])


@pytest.fixture(scope="module")
def hub_dir(tmp_path_factory):
    """The tiny VLM with Qwen2.5-VL-7B-Instruct's template where the hub dir has it: chat_template.json."""
    folder = save_tiny_vlm(tmp_path_factory.mktemp("templates") / "qwen25")
    (folder / "chat_template.jinja").unlink()
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": QWEN25_VL}, indent=2))
    return folder


def test_qwen25_vl_7b_instructs_own_template_is_one_trl_marks(hub_dir):
    processor = load_processor(hub_dir)
    assert processor.chat_template == QWEN25_VL
    check_chat_template(processor, hub_dir)  # not refused
    marked = get_training_chat_template(processor)
    assert marked is not None and has_generation_markers(marked)
    # the marks change nothing the model reads, and select the answers with their end tokens
    assert processor.apply_chat_template(conversation(), tokenize=False, chat_template=marked) == \
        processor.apply_chat_template(conversation(), tokenize=False)
    assert trained_text(processor, marked) == "".join(f"{answer}<|im_end|>\n" for answer in ANSWERS)


def test_the_template_survives_loupes_checkpoint_save(hub_dir, tmp_path):
    """A cycle's checkpoint is written by save_pretrained (chat_template.jinja): one changed character and TRL would
    stop recognising the template from the second cycle on."""
    saved = tmp_path / "c1"
    shutil.copytree(hub_dir, saved)
    load_processor(hub_dir).save_pretrained(saved)
    assert (saved / "chat_template.jinja").read_text() == QWEN25_VL
    check_chat_template(load_processor(saved), saved)


def test_a_template_trl_does_not_ship_is_refused_and_its_own_marks_train_the_answers(hub_dir, tmp_path):
    """Qwen2.5's text models greet with another system line (lmdeploy#3475): a VLM dir carrying that variant is not
    a template TRL knows. The documented fallback, marks in the dir's own template, gives the same answer-only mask."""
    other = tmp_path / "other"
    shutil.copytree(hub_dir, other)
    variant = QWEN25_VL.replace("You are a helpful assistant.",
                                "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")
    (other / "chat_template.json").write_text(json.dumps({"chat_template": variant}))
    processor = load_processor(other)
    with pytest.raises(TrainerError, match=r"not one TRL knows how to mark .* \{% generation %\} \.\.\. "
                                           r"\{% endgeneration %\}"):
        check_chat_template(processor, other)
    own = get_training_chat_template(load_processor(hub_dir)).replace(
        "You are a helpful assistant.", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")
    (other / "chat_template.json").write_text(json.dumps({"chat_template": own}))
    processor = load_processor(other)
    check_chat_template(processor, other)
    assert trained_text(processor, processor.chat_template) == "".join(f"{answer}<|im_end|>\n" for answer in ANSWERS)
