"""Server paths out of what the dashboard shows: a folder of the hub's becomes its short name.

A persona's TOML error, a skill's, a store's problem name the file they are about by its full
path on the server (``/srv/bot/contexts/default.toml``). The operator needs the file, not the
server's layout: each known folder is shown by its own name (``contexts/default.toml``), the
config file's folder and the home folder by nothing and ``~``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["PathScrubber"]


class PathScrubber:
    """Replaces each known folder's absolute path in a text by a short name."""

    def __init__(self, folders: Iterable[Path], *, base: Path | None = None) -> None:
        pairs: dict[str, str] = {}
        for folder in folders:
            for spelling in _spellings(folder):
                pairs[spelling + os.sep] = folder.name + "/"
                pairs.setdefault(spelling, folder.name)
        if base is not None:
            for spelling in _spellings(base):
                pairs.setdefault(spelling + os.sep, "")
        home = str(Path.home())
        if len(home) > 1:
            pairs.setdefault(home + os.sep, "~/")
        # longest first: a folder inside another is replaced as itself
        self._pairs = sorted(((k, v) for k, v in pairs.items() if len(k) > 1), key=lambda kv: -len(kv[0]))

    def __call__(self, text: str) -> str:
        if os.sep not in text:  # most values: nothing to look for
            return text
        for path, short in self._pairs:
            if path in text:
                text = text.replace(path, short)
        return text


def _spellings(folder: Path) -> set[str]:
    """The folder as given and as resolved (a symlinked /tmp, a relative path), absolute."""
    out = {str(folder.absolute()).rstrip(os.sep)}
    try:
        out.add(str(folder.resolve()).rstrip(os.sep))
    except OSError:
        pass
    return {s for s in out if s}
