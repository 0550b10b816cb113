"""URL slugs from titles: "Hello, World!" -> "hello-world"."""

from __future__ import annotations

import re
import unicodedata

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text: str, sep: str = "-", max_length: int | None = None) -> str:
    """Lower-case ASCII letters and digits, runs of anything else replaced by `sep`."""
    # NFKD splits "é" into "e" + a combining accent, which the ASCII encoding then drops.
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NON_ALNUM.sub(sep, ascii_text.lower()).strip(sep)
    if max_length is not None and len(slug) > max_length:
        # Cut at a separator when possible so that no word is left half.
        cut = slug.rfind(sep, 0, max_length + 1)
        slug = slug[:cut] if cut > 0 else slug[:max_length]
    return slug


def unique_slug(text: str, taken: set[str], sep: str = "-") -> str:
    """slugify(text), with "-2", "-3", ... appended until it is not in `taken`."""
    base = slugify(text, sep) or "untitled"
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}{sep}{n}"
    return slug
