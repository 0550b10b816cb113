"""The one kind of error a user fixes by changing their input, and how the commands show it.

A bad config value, an unknown plug-in name, a checkpoint the config cannot resume, a cluster
too small for the config: each module raises its own subclass of `UserError` (with a message
that names the field, file or key and the accepted values), and every command catches
`UserError` at one place and prints the message as one line, without a traceback, exit code 2.
"""

from __future__ import annotations

import sys
from typing import NoReturn


class UserError(Exception):
    """A problem in the user's input; the message says what and where, in one line."""


def fail(prog: str, message: str) -> NoReturn:
    """End a command with its one-line error (`prog: error: message` on stderr), exit code 2."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)
