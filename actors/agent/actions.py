"""One assistant turn of the agent mode -> its one action. Pure: text in, a typed Action out.

A turn is free text (the model's reasoning, not read) and exactly one action:

- bash: a fenced block whose opening line is exactly ```bash or ```sh and whose closing line
  is exactly ``` (each line compared with its surrounding whitespace stripped). The command is
  the body between them, stripped. It cannot hold a line ``` (that line closes the block).
- edit: one or more SEARCH/REPLACE blocks in the SWE-RL answer format, found and grouped by
  path with the reward's own parser (reward/parse.py: a fence line, `### path`,
  `<<<<<<< SEARCH`, the lines to find, `=======`, their replacement, `>>>>>>> REPLACE`, a
  closing fence). Paths are not judged here: the episode refuses an unsafe one before anything
  is read and still applies the others, so the model learns which path was wrong.
- submit: a block opened by exactly ```submit, with an empty body: the episode ends.

How blocks are found. Edit blocks first, over the whole turn (`find_edit_blocks`); their spans
are then cut out, so that a ```bash fence inside an edit's text (a Markdown file being edited)
is not a command. The rest is read line by line as Markdown reads fences: a line starting
with ``` opens a block, the next line that is exactly ``` closes it, and an unclosed block runs
to the end of the turn. A block of any other language (```python quoting code, ```text, a bare
```) is neither an action nor an error and its body is not read for actions. A fence inside a
line ("run ```ls``` now") is text.

Format errors (kind "invalid"; `error` says which, in words addressed to the model):
- no action at all;
- two or more bash blocks, or two or more submit blocks;
- a bash block with edit blocks, a bash block with a submit block, or a submit block with edit
  blocks (a submit ends the episode: edits beside it would never be seen applied);
- a malformed edit block: a line `<<<<<<< SEARCH` outside every well-formed block and outside
  bash and submit bodies. The reward skips such a block silently; an agent that is not told
  would believe its edit applied;
- an empty bash block, a non-empty submit block, a bash or submit block left unclosed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from reward.parse import Edit, find_edit_blocks, group_edits

FENCE = "```"
BASH_FENCES = ("```bash", "```sh")
SUBMIT_FENCE = "```submit"
SEARCH_MARK = "<<<<<<< SEARCH"

ActionKind = Literal["bash", "edit", "submit", "invalid"]


@dataclass(frozen=True)
class Action:
    """The one action of a turn: a command, the edits by path (in order), a submit, or why the
    turn is not one of these."""

    kind: ActionKind
    # The bash command, stripped (kind "bash" only).
    command: str = ""
    # path -> (search, replace) pairs in order, paths verbatim (kind "edit" only).
    edits: dict[str, list[Edit]] = field(default_factory=dict)
    # What was wrong with the turn (kind "invalid" only).
    error: str = ""


@dataclass(frozen=True)
class _Block:
    """A run of the turn's lines: free text (`fence` None) or a fenced block (its opening line,
    stripped); `closed` is False for a fenced block that runs to the end of the turn."""

    fence: str | None
    body: str
    closed: bool = True


def parse_turn(text: str) -> Action:
    """The turn's one action, or an "invalid" Action saying why it has none (module docstring)."""
    edit_blocks = find_edit_blocks(text)
    pieces, pos = [], 0
    for block in edit_blocks:
        pieces.append(text[pos : block.start])
        pos = block.end
    pieces.append(text[pos:])
    runs = _runs("\n".join(pieces))
    bash = [run for run in runs if run.fence in BASH_FENCES]
    submit = [run for run in runs if run.fence == SUBMIT_FENCE]
    # Every run that is neither a bash nor a submit body: free text and other languages' blocks.
    malformed = any(
        line.strip() == SEARCH_MARK
        for run in runs
        if run.fence not in (*BASH_FENCES, SUBMIT_FENCE)
        for line in run.body.split("\n")
    )
    if error := _conflict(len(bash), len(submit), bool(edit_blocks) or malformed):
        return Action(kind="invalid", error=error)
    if malformed:
        return Action(
            kind="invalid",
            error="a SEARCH/REPLACE block is malformed: write a fence line, `### path`, `<<<<<<< SEARCH`, "
            "the lines to find, `=======`, their replacement, `>>>>>>> REPLACE` and a closing fence, "
            "each on its own line",
        )
    if bash:
        if not bash[0].closed:
            return Action(kind="invalid", error="the bash block is not closed (a line ``` ends it)")
        command = bash[0].body.strip()
        if not command:
            return Action(kind="invalid", error="the bash block is empty")
        return Action(kind="bash", command=command)
    if submit:
        if not submit[0].closed:
            return Action(kind="invalid", error="the submit block is not closed (a line ``` ends it)")
        if submit[0].body.strip():
            return Action(kind="invalid", error="the submit block must be empty")
        return Action(kind="submit")
    return Action(kind="edit", edits=group_edits([(b.path, b.search, b.replace) for b in edit_blocks]))


def _conflict(bash: int, submit: int, edits: bool) -> str | None:
    """Why the turn does not hold exactly one action, or None when it does."""
    if bash > 1:
        return f"{bash} bash blocks: run one command per turn"
    if submit > 1:
        return f"{submit} submit blocks: submit once"
    if bash and edits:
        return "a bash block and edit blocks: one kind of action per turn"
    if bash and submit:
        return "a bash block and a submit block: one kind of action per turn"
    if submit and edits:
        return "a submit block and edit blocks: apply the edits first, and submit in a later turn"
    if not (bash or submit or edits):
        return "no action: end the turn with a ```bash block, SEARCH/REPLACE edit blocks or a ```submit block"
    return None


def _runs(text: str) -> list[_Block]:
    """The text cut into free-text runs and fenced blocks, as Markdown reads fences."""
    lines = text.split("\n")
    runs: list[_Block] = []
    free: list[str] = []
    i = 0
    while i < len(lines):
        opening = lines[i].strip()
        if not opening.startswith(FENCE):
            free.append(lines[i])
            i += 1
            continue
        close = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == FENCE), None)
        end = len(lines) if close is None else close
        runs.append(_Block(opening, "\n".join(lines[i + 1 : end]), closed=close is not None))
        # Resuming after the closing line keeps the scan linear: no line is read twice.
        i = end + 1
    runs.append(_Block(None, "\n".join(free)))
    return runs
