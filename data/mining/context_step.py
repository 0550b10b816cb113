"""The build's `--context model` step: batches of kept rows -> a model's relevant files.

Mining (data/mining/extract.py) leaves a row's relevant unchanged files out when a model is to choose
them; data/build.py hands each such row here, after the duplicate rules, and writes what comes
back. Rows are held until `batch` of them wait, then one generate call answers all their
questions (data/context/question.py writes and reads them; the engine is a factory the command
passes in, actors/rollout/context_engine.py's, started when the first question is asked, so an
imports-only build never starts one). Each answer's candidate paths are added in the answer's order, within the context
budget, up to K; when none is added (no answer, nothing usable named, the question too long
for the engine, or nothing fitting the budget) the import heuristic fills in (data/context/imports.py),
counted as a fallback. One line per row in `_manifest.context.jsonl` says which way its context
was chosen and what the model answered; the manifest keeps the counts (ContextStats).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from conf.config import ModelConfig, RolloutConfig, engine_config
from data.context.imports import relevant_candidates
from data.context.question import ContextStats, Question, question, read_answer
from data.git.repo import Repo
from data.mining.extract import add_relevant
from data.mining.filters import FilterConfig, context_size
from data.shards import MANIFEST

SIDECAR = MANIFEST.replace(".json", ".context.jsonl")  # cleared with the manifest on --overwrite
MODES = ("imports", "model")
ANSWER_CHARS = 400  # of each answer kept in the sidecar


@dataclass(frozen=True)
class ContextConfig:
    # How the K relevant unchanged files are chosen: "imports" (data/context/imports.py: Python
    # imports, no model) or "model" (ask a model, as the paper did; imports as the fallback).
    mode: str = "imports"
    # The model: a known name (as model.name: "smollm2-135m-instruct", "tiny") or a local
    # Hugging Face directory (on a cluster, a large instruct model).
    model: str = ModelConfig.name
    # Weights dtype of the engine (float32 on CPU, bfloat16 on GPU).
    dtype: str = ModelConfig.dtype
    # Questions per generate call (rows wait until this many are kept).
    batch: int = 64
    # Answer length limit in tokens (K paths need few).
    max_new_tokens: int = 128
    # The engine's context length; a question longer than this minus max_new_tokens is not asked.
    max_model_len: int = RolloutConfig.max_model_len
    # Candidate files shown in a question's tree, the nearest to the changed files first.
    max_tree_files: int = 200
    # Characters of the issue text and of the patch shown in a question, each.
    max_text_chars: int = 3000
    # GPUs of the engine's Ray actor (only when the build runs on Ray; 0 = CPU engine).
    gpus: float = 0.0
    # vLLM tensor parallel size (GPU only) and share of GPU memory it may take.
    tensor_parallel_size: int = RolloutConfig.tensor_parallel_size
    gpu_memory_utilization: float = RolloutConfig.gpu_memory_utilization
    # KV cache of a CPU engine in GiB.
    kv_cache_gib: int = RolloutConfig.kv_cache_gib

    def engine(self) -> RolloutConfig:
        """The rollout worker's config for this engine (greedy decoding is per request)."""
        return engine_config(
            max_new_tokens=self.max_new_tokens,
            max_model_len=self.max_model_len,
            num_gpus=self.gpus,
            tensor_parallel_size=self.tensor_parallel_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_gib=self.kv_cache_gib,
            max_prompts_per_call=self.batch,  # a batch of questions is one generate call
        )


class Asker(Protocol):
    """What answers questions: ids and chat messages in, one text (or None: not asked) each."""

    def ask(self, ids: list[str], messages: list[list[dict[str, str]]]) -> list[str | None]: ...

    def close(self) -> None: ...


class ContextChooser:
    def __init__(
        self,
        cfg: ContextConfig,
        k: int,
        filters: FilterConfig,
        git_of: dict[str, str],
        out: Path,
        start: Callable[[], Asker],
    ) -> None:
        """`git_of`: clone path per repository name (lower case); `start` makes the asker."""
        self.cfg, self.k, self.filters, self.git_of, self.start = cfg, k, filters, git_of, start
        self.stats = ContextStats()
        self.asker: Asker | None = None
        self.waiting: list[tuple[dict[str, Any], bool]] = []
        self.repos: dict[str, Repo] = {}
        self.sidecar = (out / SIDECAR).open("w", encoding="utf-8")

    def add(self, row: dict[str, Any], ask: bool = True) -> Iterator[dict[str, Any]]:
        """Hold `row`; yield the rows of a full batch, their contexts completed, in order. A row
        with `ask` false (it carries its own files) passes through as it is."""
        self.waiting.append((row, ask))
        if len(self.waiting) >= self.cfg.batch:
            yield from self.flush()

    def flush(self) -> Iterator[dict[str, Any]]:
        held, self.waiting = self.waiting, []
        rows = [r for r, ask in held if ask]
        questions = [self._question(r) for r in rows]
        asked = [(r, q) for r, q in zip(rows, questions, strict=True) if q is not None]
        texts: list[str | None] = []
        if asked:
            started = time.perf_counter()
            if self.asker is None:
                self.asker = self.start()
            texts = self.asker.ask([q.instance_id for _, q in asked], [q.messages for _, q in asked])
            self.stats.model_s = round(self.stats.model_s + time.perf_counter() - started, 3)
            print(f"[build] context: the model answered {len(asked)} questions", file=sys.stderr, flush=True)
        answers = {q.instance_id: (q, t) for (_, q), t in zip(asked, texts, strict=True)}
        for row, ask in held:
            if ask:
                self._complete(row, *answers.get(row["instance_id"], (None, None)))
            yield row

    def _repo(self, row: dict[str, Any]) -> Repo:
        path = self.git_of[row["repo"].lower()]
        if path not in self.repos:
            self.repos[path] = Repo(path)
        return self.repos[path]

    def _question(self, row: dict[str, Any]) -> Question | None:
        repo = self._repo(row)
        tree = repo.text("ls-tree", "-r", "--name-only", "-z", row["base_commit"]).split("\0")
        changed = [f["path"] for f in row["code_context"]]
        q = question(
            row["instance_id"],
            row["problem_statement"],
            row["patch"],
            changed,
            [p for p in tree if p and "\n" not in p],
            self.k,
            max_tree_files=self.cfg.max_tree_files,
            max_text_chars=self.cfg.max_text_chars,
        )
        return q if q.candidates else None  # nothing to pick from: nothing to ask

    def _complete(self, row: dict[str, Any], q: Question | None, text: str | None) -> None:
        """Add the model's picks (or the fallback's) to the row's code_context; record how."""
        repo, base = self._repo(row), row["base_commit"]
        context = {f["path"]: f["content"] for f in row["code_context"]}
        used = context_size([row["problem_statement"], *context.values()], self.filters)
        s, record = self.stats, {"instance_id": row["instance_id"]}
        added: dict[str, str] = {}
        if q is not None and text is not None:
            s.asked += 1
            answer = read_answer(text, q, self.k)
            s.answers_with_picks += bool(answer.picks)
            s.files_picked += len(answer.picks)
            s.unknown_paths += len(answer.unknown)
            s.not_candidates += len(answer.not_candidates)
            added = add_relevant(repo, base, answer.picks, used, self.k, self.filters)
            s.files_added += len(added)
            record |= {"picks": answer.picks, "unknown": answer.unknown, "answer": text[:ANSWER_CHARS]}
        elif q is not None:
            s.too_long += 1
        chosen = "model"
        if not added:
            s.fallback += 1
            candidates = relevant_candidates(repo, base, list(context), set(context))
            added = add_relevant(repo, base, candidates, used, self.k, self.filters)
            chosen = "imports_fallback" if added else "none"
        s.chosen[chosen] += 1
        row["code_context"] = [*row["code_context"], *({"path": p, "content": c} for p, c in added.items())]
        self.sidecar.write(json.dumps(record | {"chosen": chosen, "added": list(added)}) + "\n")

    def __enter__(self) -> ContextChooser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.asker is not None:
            self.asker.close()
            self.asker = None
        for repo in self.repos.values():
            repo.close()
        self.repos.clear()
        self.sidecar.close()
