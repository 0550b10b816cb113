"""Hub ids (learner/hub.py, through learner/models.py's resolution), offline: a hub-layout cache
laid out in tmp_path holds the project's tiny model under `acme/tiny-coder` at two commits."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub.constants as hub_constants
import pytest

from conf.config import ConfigError, ModelConfig
from learner import hub, models

REPO = "acme/tiny-coder"
MAIN = "a" * 40  # the commit refs/main names
OLD = "b" * 40  # an older commit, reachable only by model.revision


@pytest.fixture(scope="module")
def tiny_saved(tmp_path_factory) -> Path:
    """The tiny model, loaded and saved again with save_pretrained (as a hub repository holds it)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = models.resolve(ModelConfig(name="tiny"))
    out = tmp_path_factory.mktemp("tiny-saved")
    AutoModelForCausalLM.from_pretrained(src).save_pretrained(out)
    AutoTokenizer.from_pretrained(src).save_pretrained(out)
    return out


def lay_out(cache: Path, repo: str, commit: str, files: Path, *, ref: str | None = None) -> Path:
    """models--org--name/snapshots/<commit>/ holding `files`' files, refs/<ref> naming the commit."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    snap = folder / "snapshots" / commit
    snap.mkdir(parents=True)
    for f in files.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    if ref:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / ref).write_text(commit)
    return snap


@pytest.fixture
def offline_cache(tmp_path, monkeypatch, tiny_saved) -> Path:
    """An HF_HOME with acme/tiny-coder at MAIN (refs/main) and OLD, and the hub switched off."""
    cache = tmp_path / "hf" / "hub"
    lay_out(cache, REPO, MAIN, tiny_saved, ref="main")
    lay_out(cache, REPO, OLD, tiny_saved)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads both variables when imported: its constants are what it uses
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    return cache


def snapshot_dir(cache: Path, commit: str) -> str:
    return str((cache / "models--acme--tiny-coder" / "snapshots" / commit).resolve())


def test_a_hub_id_resolves_to_the_snapshot_refs_main_names(offline_cache):
    assert models.resolve(ModelConfig(name=REPO)) == snapshot_dir(offline_cache, MAIN)


def test_model_revision_picks_its_commit(offline_cache):
    assert models.resolve(ModelConfig(name=REPO, revision=OLD)) == snapshot_dir(offline_cache, OLD)


def test_the_resolved_snapshot_loads_as_the_tiny_model(offline_cache, tiny_saved):
    path = models.resolve(ModelConfig(name=REPO))
    tok = models.tokenizer(path)
    ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert ids == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert (Path(path) / "model.safetensors").read_bytes() == (tiny_saved / "model.safetensors").read_bytes()


def test_an_unknown_id_is_one_line_naming_the_id_revision_and_the_download(offline_cache):
    with pytest.raises(ConfigError) as err:
        models.resolve(ModelConfig(name="acme/missing", revision="v2"))
    message = str(err.value)
    assert message.startswith("model.name='acme/missing' (revision 'v2'): not in the Hugging Face cache")
    assert "HF_HUB_OFFLINE is set" in message
    assert "`hf download acme/missing --revision v2`" in message
    assert "\n" not in message


def test_an_unreachable_hub_is_the_same_one_line_error(offline_cache, monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(ConfigError) as err:
        models.resolve(ModelConfig(name="acme/missing"))
    message = str(err.value)
    assert message.startswith("model.name='acme/missing' (revision 'main'): not in the Hugging Face cache")
    assert "the hub is unreachable" in message and "`hf download acme/missing --revision main`" in message
    assert "\n" not in message


def test_a_cached_snapshot_without_weights_is_not_taken(offline_cache, tmp_path):
    """A cache holding only a tokenizer and config (as AutoTokenizer leaves) is not the model."""
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    lay_out(offline_cache, "acme/tokenizer-only", MAIN, partial, ref="main")
    with pytest.raises(ConfigError, match=r"model.name='acme/tokenizer-only' \(revision 'main'\): not in the"):
        models.resolve(ModelConfig(name="acme/tokenizer-only"))


def test_another_nodes_snapshot_path_resolves_to_this_nodes_copy_of_the_commit(offline_cache):
    elsewhere = f"/nowhere/hub/models--acme--tiny-coder/snapshots/{OLD}"
    assert hub.on_this_node(elsewhere) == snapshot_dir(offline_cache, OLD)
    with pytest.raises(ConfigError, match="model directory /nowhere/model is absent on node"):
        hub.on_this_node("/nowhere/model")


def test_a_local_directory_wins_and_has_no_revision(tiny_saved, monkeypatch):
    monkeypatch.chdir(tiny_saved.parent)
    relative = tiny_saved.name  # one path part: never an org/name
    assert models.resolve(ModelConfig(name=str(tiny_saved))) == str(tiny_saved.resolve())
    assert models.local_model(relative) == str(tiny_saved.resolve())
    with pytest.raises(ConfigError, match="model.revision='main': model.name=.* is a local directory"):
        models.resolve(ModelConfig(name=str(tiny_saved), revision="main"))
    with pytest.raises(ConfigError, match="model.revision='v1': only a hub id has revisions"):
        models.resolve(ModelConfig(name="tiny", revision="v1"))
    with pytest.raises(ConfigError, match=r"model.name='\./missing': not a known model .* nor a hub id"):
        models.resolve(ModelConfig(name="./missing"))


def test_the_evaluation_takes_a_hub_id_and_its_revision(offline_cache):
    from conf.eval import parse_args

    cfg = parse_args([f"model.name={REPO}", f"model.revision={MAIN}"])  # validated as an id, not a directory
    assert (cfg.model.name, cfg.model.revision) == (REPO, MAIN)
    assert models.resolve(cfg.model) == snapshot_dir(offline_cache, MAIN)
    with pytest.raises(ConfigError, match=r"^model.name='acme/missing' \(revision 'main'\): not in the"):
        models.resolve(parse_args(["model.name=acme/missing"]).model)
