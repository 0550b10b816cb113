"""Near-duplicate instances: MinHash signatures of token shingles, found through an LSH index.

The exact rule (`duplicate`, data/build.py) catches only byte-identical patches; the same fix
merged twice (a backport, a re-opened PR, a fork's copy) differs by a word, a line number or a
blob id. Here an instance is the set of its 5-token shingles over the problem statement and
the patch (each tagged with its part, so issue text never matches patch text); two instances
are near-duplicates when the Jaccard similarity of those sets, estimated from 128-permutation
MinHash signatures (rensa, seeded: the same signatures on every run and machine), is at least
the threshold. An LSH index over band hashes proposes candidates in about constant time per
query; each candidate's estimated similarity is then checked against the threshold.

Two indexes, consulted in this order: the evaluation rows (SWE-bench files given with
`--exclude` / `--exclude-repos` that carry problem statements and patches), whose near copies
are counted `near_excluded`; and the instances kept so far, whose near copies are counted
`near_duplicate`: the first kept wins, as with the exact rule, so the outcome follows the
deterministic candidate order. The shingle size, the number of permutations and the default
threshold 0.8 are ours, not taken from the paper.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from rensa import RMinHash, RMinHashLSH

SHINGLE_TOKENS = 5  # tokens per shingle: long enough that shared boilerplate rarely matches
NUM_PERM = 128  # MinHash permutations: the estimate's standard error is sqrt(J(1-J)/128), 0.035 at J=0.8
MINHASH_SEED = 0  # fixed, so signatures of two runs (and of the reference set) are comparable
RECALL_AT_THRESHOLD = 0.95  # chance that the LSH proposes a pair exactly at the threshold

# Words (identifiers, numbers) and single punctuation marks: code and prose alike.
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
# A blob id line ("index 1a2b3c4..5d6e7f8 100644") differs between otherwise equal patches.
_INDEX_LINE_RE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+.*$", re.M)


def shingles(text: str, k: int = SHINGLE_TOKENS) -> set[str]:
    """The set of k consecutive tokens of `text` (one shingle of all tokens when fewer than k)."""
    tokens = _TOKEN_RE.findall(text)
    if len(tokens) <= k:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + k]) for i in range(len(tokens) - k + 1)}


def instance_shingles(problem_statement: str, patch: str) -> set[str]:
    """Shingles of an instance: the statement's and the patch's, tagged so they never mix."""
    return {f"s\0{s}" for s in shingles(problem_statement)} | {
        f"p\0{s}" for s in shingles(_INDEX_LINE_RE.sub("", patch))
    }


def signature(problem_statement: str, patch: str) -> RMinHash:
    m = RMinHash(NUM_PERM, MINHASH_SEED)
    m.update(list(instance_shingles(problem_statement, patch)))  # a min over the set: order-free
    return m


def lsh_bands(threshold: float, num_perm: int = NUM_PERM) -> int:
    """The fewest LSH bands b (r = num_perm / b rows each) that propose a pair of similarity
    J = threshold with probability 1 - (1 - J^r)^b >= RECALL_AT_THRESHOLD.

    Fewer bands propose fewer dissimilar pairs (each costs one signature comparison), more
    bands miss fewer similar ones; a missed near-duplicate stays in the data, a proposed
    dissimilar pair is rejected by the comparison, so recall at the threshold decides.
    """
    for b in (b for b in range(1, num_perm + 1) if num_perm % b == 0):
        if 1 - (1 - threshold ** (num_perm // b)) ** b >= RECALL_AT_THRESHOLD:
            return b
    return num_perm


@dataclass
class NearDupIndex:
    """Signatures of named instances behind an LSH index; `match` returns the most similar."""

    threshold: float
    _names: list[str] = field(default_factory=list)
    _signatures: list[RMinHash] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise ValueError(f"threshold={self.threshold}: must be in (0, 1]")
        self._lsh = RMinHashLSH(self.threshold, NUM_PERM, lsh_bands(self.threshold))

    def __len__(self) -> int:
        return len(self._names)

    def add(self, name: str, sig: RMinHash) -> None:
        self._lsh.insert(len(self._names), sig)
        self._names.append(name)
        self._signatures.append(sig)

    def match(self, sig: RMinHash) -> tuple[str, float] | None:
        """(name, estimated Jaccard) of the most similar instance at or above the threshold;
        ties go to the one added first, so the answer does not depend on the index's internals."""
        best: tuple[float, int] | None = None
        for key in self._lsh.query(sig):
            similarity = sig.jaccard(self._signatures[key])
            if similarity >= self.threshold and (best is None or (similarity, -key) > (best[0], -best[1])):
                best = (similarity, key)
        return None if best is None else (self._names[best[1]], best[0])


@dataclass
class NearDuplicates:
    """The build's near-duplicate rule: reference (evaluation) rows first, then kept instances."""

    threshold: float
    references: NearDupIndex = field(init=False)
    kept: NearDupIndex = field(init=False)

    def __post_init__(self) -> None:
        self.references = NearDupIndex(self.threshold)
        self.kept = NearDupIndex(self.threshold)

    def add_references(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """(instance id, problem statement, patch) of evaluation rows to keep the set away from."""
        for name, statement, patch in rows:
            self.references.add(name, signature(statement, patch))

    def check(self, instance_id: str, problem_statement: str, patch: str) -> tuple[str, str]:
        """("kept", "") and remember the instance, or (reason, which instance it resembles)."""
        sig = signature(problem_statement, patch)
        for reason, index in (("near_excluded", self.references), ("near_duplicate", self.kept)):
            hit = index.match(sig)
            if hit is not None:
                return reason, f"like {hit[0]} (Jaccard ~{hit[1]:.2f})"
        self.kept.add(instance_id, sig)
        return "kept", ""
