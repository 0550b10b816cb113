"""The SWE-RL reward rules written out literally: the executable specification.

This module transcribes the rules of the reward (docs/reward.md, rules 1-6) as directly as
Python allows, with the standard library's `re` and `difflib` and nothing clever: no time cap,
no size guard, no linear-time parser. It is slow (pure-Python `SequenceMatcher`) and it can
stall on adversarial outputs, so the trainer never calls it. Two callers need it:

- the tests, which check that the fast scorer (`reward.core`) gives the same per-file ratios
  and the same reward on hand-made, generated and real inputs;
- `bench/reward.py`, which reports the fast scorer's speed as a ratio to this one.

Departures from the paper's released code: rule 2 also rejects an edit whose path is not a
plain relative path of the repository (absolute, `..`, `.`, an empty component, a backslash or
NUL): such a path names a file outside the repository, and the execution rewards would write
it (docs/reward.md). Rule 3 also rejects an answer whose edits, together, would read and write
more than `reward.apply.MAX_APPLY_WORK` characters (each applied edit counts the length of the
text before plus after it): a policy that rewrites a file thousands of times over would stall a
reward worker for minutes (reward/apply.py says why, and why -1). And where the released code
sums the per-file ratios over an unordered set, this sums in sorted path order (the last bits of
a mean over three or more files may differ; the tests compare means to 1e-12).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

from unidiff import PatchSet

from reward.apply import MAX_APPLY_WORK

TAGS = ("<think>", "</think>", "<solution>", "</solution>")
EDIT_PATTERN = re.compile(r"```.*?\n### (.*)\n<<<<<<< SEARCH\n([\s\S]*?)\n=======\n([\s\S]*?)\n>>>>>>> REPLACE\n```")


def reference_new_content(code_context: Mapping[str, str], output: str) -> dict[str, str] | None:
    """Rules 1-3: the predicted new content of every edited path, or None for reward -1."""
    if any(output.count(tag) != 1 for tag in TAGS):
        return None
    thought = output.split("<think>")[1].split("</think>")[0].strip()
    answer = output.split("<solution>")[1].split("</solution>")[0].strip()
    if not thought:
        return None
    edits: dict[str, list[tuple[str, str]]] = {}
    for path, search, replace in EDIT_PATTERN.findall(answer):
        edits.setdefault(path, []).append((search, replace))
    if not edits:
        return None
    for path in edits:  # rule 2's path check: a plain relative path of the repository
        if not path or path.startswith("/") or "\\" in path or "\0" in path:
            return None
        if any(part in ("", ".", "..") for part in path.split("/")):
            return None
    new_content: dict[str, str] = {}
    work = 0
    for path, path_edits in edits.items():
        content = "\n" + code_context.get(path, "")
        for search, replace in path_edits:
            if search == replace:
                return None
            search, replace = "\n" + search, "\n" + replace
            if search not in content:
                return None
            work += len(content) + len(content) + content.count(search) * (len(replace) - len(search))
            if work > MAX_APPLY_WORK:
                return None
            content = content.replace(search, replace)
        new_content[path] = content[1:]
    return new_content


def reference_diffs(code_context: Mapping[str, str], new_content: Mapping[str, str]) -> dict[str, str]:
    """Rule 4: path -> unified diff body (headers dropped) for every path whose diff is non-empty."""
    diffs: dict[str, str] = {}
    for path, new in new_content.items():
        old = code_context.get(path, "")
        lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), n=3, lineterm=""))
        text = "\n".join(lines[2:])
        if text:
            diffs[path] = text
    return diffs


def reference_file_ratios(pred_diffs: Mapping[str, str], oracle_diffs: Mapping[str, str]) -> dict[str, float]:
    """Rule 5, per path: 0 when either side is missing or empty, else the SequenceMatcher ratio."""
    ratios: dict[str, float] = {}
    for path in set(pred_diffs) | set(oracle_diffs):
        pred, oracle = pred_diffs.get(path, ""), oracle_diffs.get(path, "")
        if not pred or not oracle:
            ratios[path] = 0.0
        else:
            ratios[path] = difflib.SequenceMatcher(None, pred, oracle, autojunk=False).ratio()
    return ratios


def reference_mean(ratios: Mapping[str, float]) -> float:
    """Rule 5: the plain mean over paths; no paths at all gives 1.0."""
    if not ratios:
        return 1.0
    return sum(ratios[path] for path in sorted(ratios)) / len(ratios)


def reference_score_output(
    code_context: Mapping[str, str], oracle_new_content: Mapping[str, str], output: str
) -> float:
    """Rules 1-5: the reward of one model output."""
    new_content = reference_new_content(code_context, output)
    if new_content is None:
        return -1.0
    pred = reference_diffs(code_context, new_content)
    oracle = reference_diffs(code_context, oracle_new_content)
    return reference_mean(reference_file_ratios(pred, oracle))


def reference_file_changes(patch_texts: Sequence[str]) -> dict[str, str]:
    """Rule 6, parsing: path -> file-level change text of a list of unified diffs."""
    changes: dict[str, str] = {}
    for text in patch_texts:
        try:
            patch = PatchSet(text)
        except Exception:
            continue
        for patched in patch:
            if patched.is_binary_file:
                continue
            header = ""
            path = patched.path
            if patched.is_rename:
                source = patched.source_file.removeprefix("a/")
                target = patched.target_file.removeprefix("b/")
                header = f"rename from {source} to {target}"
                path = source
            body = "\n".join(str(hunk).strip() for hunk in patched)
            changes[path] = (header + "\n" + body).strip()
    return changes


def reference_score_patches(oracle_patches: Sequence[str], pred_patches: Sequence[str]) -> float:
    """Rule 6: the rule-5 score of two lists of unified diffs."""
    ratios = reference_file_ratios(reference_file_changes(pred_patches), reference_file_changes(oracle_patches))
    return reference_mean(ratios)
