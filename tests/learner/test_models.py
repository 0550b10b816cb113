"""model.chat_template (learner/models.py): what the driver's tokenizer renders, and what the
export carries."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conf.config import ConfigError, ModelConfig, TrainConfig, validate
from learner import models

TAGGED = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}>{% endif %}"
HI = [{"role": "user", "content": "hi"}]
CHATML_HI = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def tiny() -> str:
    return models.resolve(ModelConfig(name="tiny"))


def rendered(path: str, cfg: ModelConfig) -> str:
    """The driver's prompt of HI (models.prepare: the directory, the template, the tokenizer)."""
    resolved, _, tok = models.prepare(replace(cfg, name=path))
    assert resolved == str(Path(path).resolve())
    return tok.apply_chat_template(HI, add_generation_prompt=True, tokenize=False)


def test_default_is_the_tokenizers_own(tiny):
    assert models.chat_template(ModelConfig(), tiny) == ""
    assert rendered(tiny, ModelConfig()) == CHATML_HI


def test_a_template_string_overrides_the_tokenizers(tiny):
    assert rendered(tiny, ModelConfig(chat_template=TAGGED)) == "[user] hi\n>"


def test_a_template_file_overrides_the_tokenizers(tiny, tmp_path):
    (tmp_path / "tagged.jinja").write_text(TAGGED)
    assert rendered(tiny, ModelConfig(chat_template=str(tmp_path / "tagged.jinja"))) == "[user] hi\n>"


def test_a_model_without_a_template_gets_chatml(tiny, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(tiny, bare)
    (bare / "chat_template.jinja").unlink()
    assert models.chat_template(ModelConfig(), str(bare)) == models.CHATML_TEMPLATE
    assert rendered(str(bare), ModelConfig()) == CHATML_HI


def test_a_missing_template_file_is_named_at_validation():
    cfg = TrainConfig(model=ModelConfig(chat_template="templates/none.jinja"))
    with pytest.raises(ConfigError, match=r"model.chat_template='templates/none.jinja': no such file"):
        validate(cfg)


def test_a_template_that_does_not_render_is_named(tiny):
    with pytest.raises(ConfigError, match="model.chat_template: the template does not render"):
        models.tokenizer(tiny, "{% for m in messages %}{{ m['content'] }")


def test_the_export_carries_the_runs_template(tiny, tmp_path):
    from transformers import AutoTokenizer

    out = tmp_path / "hf"
    out.mkdir()
    models.copy_tokenizer(tiny, out, TAGGED)
    assert (out / "tokenizer.json").is_file()
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.apply_chat_template(HI, add_generation_prompt=True, tokenize=False) == "[user] hi\n>"
    plain = tmp_path / "plain"
    plain.mkdir()
    models.copy_tokenizer(tiny, plain)
    assert (plain / "chat_template.jinja").read_text() == Path(tiny, "chat_template.jinja").read_text()


def test_an_engines_tokenizer_renders_the_runs_template(tiny):
    """vLLM renders with copies of its tokenizer made at load (a thread pool): a template set on
    it afterwards does not reach them, the tokenizer directory it loads does."""
    from vllm.tokenizers import get_tokenizer, maybe_make_thread_pool

    late = maybe_make_thread_pool(get_tokenizer(tiny), 2)
    late.chat_template = TAGGED
    assert late.apply_chat_template(HI, add_generation_prompt=True, tokenize=False) == CHATML_HI
    loaded = maybe_make_thread_pool(get_tokenizer(models.tokenizer_dir(tiny, TAGGED)), 2)
    assert loaded.apply_chat_template(HI, add_generation_prompt=True, tokenize=False) == "[user] hi\n>"
