"""Rule 3 of the SWE-RL reward: apply the SEARCH/REPLACE edits to the code context.

Per path: start from a newline followed by the file's content in the context (nothing for a
path the context lacks, so an empty search creates a file); for each edit in order, reject
when search equals replace, prefix both with a newline (a search then matches from a line
start), reject when the search is absent, else replace every occurrence (`str.replace`). The
leading newline is dropped at the end. No normalisation of CRLF, paths or whitespace: a path
is a dictionary key, nothing here touches the file system.

Departure from the paper's released rule (a guard, not a semantic change on real outputs):
`str.replace` multiplies the text when a short search matches many times (an empty search
inserts its replacement before every line), and a few such edits in a row grow a file
exponentially until the process runs out of memory. The new size is known before replacing
(count x growth), so a path whose content would exceed `MAX_CONTENT_CHARS` is not built: it is
returned in `oversized`, its remaining edits are skipped, and the caller scores it like a pair
over the time cap (0, with a reason).

Second departure, the work cap (a rule, shared with the executable specification `reward.spec`):
the size guard bounds one file, not the work of getting there. Fifteen doubling edits grow a
file to 56 million characters, under the size guard, and then each legal edit that rewrites
the whole text reads and writes it again: a 22 KB answer of 300 such edits cost 87-90 s of CPU
and 3 GB at peak here (2.2-2.3 s and 250 MB with the cap). So every applied edit is charged
the characters it reads and writes, the text before plus the text after (both known before
`str.replace` runs: the length after is count x growth), summed over every edit and path of
the answer, and an answer whose total would exceed
`MAX_APPLY_WORK` is rejected before that edit runs (`Rejected`, reason "work: ...", rule 3:
reward -1 like a search that is not found). Why -1 and not 0 like the size guard: the decision
depends on the answer alone (sizes, not the machine), the reference gives the same -1, and an
answer that rewrites its files thousands of times over is degenerate, not a fix that is merely
large; scoring it 0 would rank it above every malformed answer of its group.

The cap and real answers (docs/benchmarks.md, measured 2026-12-06 with `bench/reward_work.py`):
415 real answers, each change written as the oracle answer (the demo sets; the requests
instances with every `resolved_by` patch that applies; SWE-bench Lite's gold and `resolved_by`
patches on the 9 of its 12 repositories whose history is at hand): median 7.5e4 characters,
largest 1.2e6 (sphinx, a 119k-character file edited several times). The cap is 2^30 (1.07e9),
897 times the largest: room for files and answers far larger than these. An answer that reaches
it has spent 2.2 s of CPU here (4.9 s in four-byte characters, which cost more per character),
well under the reward worker's CPU budget per answer (`reward.workers.cpu_limit`, 30 s by
default), which stays the backstop for what no size foretells.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reward.parse import Edit, Rejected, quote

# 64 Mi characters (64-256 MiB per copy): far beyond any real source file, small enough that a
# reward actor survives the few copies str.replace makes.
MAX_CONTENT_CHARS = 1 << 26
# Characters read and written by one answer's edits, summed over all of them (module docstring).
MAX_APPLY_WORK = 1 << 30


@dataclass
class WorkMeter:
    """The characters an answer's edits have read and written so far, against `cap`."""

    cap: int = MAX_APPLY_WORK
    spent: int = 0

    def charge(self, path: str, number: int, chars: int) -> None:
        """Count edit `number` of `path`; raises Rejected (rule 3) when the total would pass the cap."""
        if self.spent + chars > self.cap:
            raise Rejected(
                f"work: edit {number} of {quote(path)} would bring the characters read and written by the "
                f"edits past {self.cap:,} (reward.apply.MAX_APPLY_WORK)",
                format_ok=True,
            )
        self.spent += chars


@dataclass(frozen=True)
class Applied:
    """The predicted new content of every edited path, the paths too large to build, and the
    characters the edits read and wrote (`WorkMeter`)."""

    new_content: dict[str, str]
    oversized: tuple[str, ...] = field(default=())
    work: int = 0


def apply_path_edits(
    path: str, original: str, edits: list[Edit], max_chars: int, meter: WorkMeter | None = None
) -> str | None:
    """Apply one path's edits in order; None when the content would exceed max_chars. Each edit
    is charged to `meter` (a fresh one, the cap for these edits alone, when None)."""
    meter = WorkMeter() if meter is None else meter
    content = "\n" + original
    for number, (search, replace) in enumerate(edits, start=1):
        if search == replace:
            raise Rejected(f"edit {number} of {quote(path)}: search equals replace", format_ok=True)
        search, replace = "\n" + search, "\n" + replace
        count = content.count(search)
        if count == 0:
            raise Rejected(f"search block {number} not found in {quote(path)}", format_ok=True)
        new_size = len(content) + count * (len(replace) - len(search))
        # The work cap first: an edit over both caps is -1, as in the reference (no size guard).
        meter.charge(path, number, len(content) + new_size)
        if new_size > max_chars + 1:
            return None
        content = content.replace(search, replace)
    return content[1:]


def apply_edits(
    code_context: Mapping[str, str],
    edits: Mapping[str, list[Edit]],
    max_chars: int = MAX_CONTENT_CHARS,
    max_work: int = MAX_APPLY_WORK,
) -> Applied:
    """Rule 3 for every edited path; raises Rejected (format_ok=True) on a failed edit or when
    the edits together pass the work cap.

    A path that grows too large stops being edited, but the other paths are still applied so
    that a failed search anywhere still gives -1, as in the reference.
    """
    meter = WorkMeter(max_work)
    new_content: dict[str, str] = {}
    oversized: list[str] = []
    for path, path_edits in edits.items():
        # The spec's rule: a path missing from the context starts empty (a new file).
        result = apply_path_edits(path, code_context.get(path, ""), path_edits, max_chars, meter)
        if result is None:
            oversized.append(path)
        else:
            new_content[path] = result
    return Applied(new_content, tuple(oversized), meter.spent)
