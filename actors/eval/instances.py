"""The instances an evaluation runs on: the split the trainer held out (or the other one),
prompted and encoded as the trainer's loader does, over-long prompts dropped and counted."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from conf.eval import EvalConfig
from data.loader import PromptItem, is_heldout, resolve_path, shard_files
from data.prompt import build_messages, encode_prompt
from data.schema import Instance


@dataclass
class Selection:
    items: list[PromptItem]
    split: str  # "heldout", "train" or "all"
    skipped_other_split: int = 0
    dropped_too_long: int = 0


def select_items(cfg: EvalConfig, tokenizer: Any) -> Selection:
    """The split's instances in file order, as the trainer's loader splits and encodes them."""
    sel = Selection([], cfg.split if cfg.heldout_fraction > 0 else "all")
    for instance in split_instances(cfg, sel):
        ids = encode_prompt(tokenizer, build_messages(instance, cfg.seed))
        if len(ids) > cfg.max_prompt_tokens:
            sel.dropped_too_long += 1
            continue
        sel.items.append(PromptItem(instance, ids))
        if cfg.limit and len(sel.items) >= cfg.limit:
            return sel
    return sel


def split_instances(cfg: EvalConfig, sel: Selection) -> Iterator[Instance]:
    """The instances of sel.split in file order; those of the other split are counted in sel."""
    for shard in shard_files(resolve_path(cfg.data)):
        for i, row in enumerate(pq.read_table(shard).to_pylist()):
            instance = Instance.from_row(row, where=f"{shard}: row {i}")
            if sel.split != "all" and is_heldout(instance.instance_id, cfg.heldout_fraction) != (
                sel.split == "heldout"
            ):
                sel.skipped_other_split += 1
                continue
            yield instance
