"""The platforms installed: each platform extension's name as people write it, from package metadata.

A platform package declares its name in the entry-point group ``hub.platforms``, beside its
``hub.extensions`` entry point and naming the same module::

    [project.entry-points."hub.extensions"]
    twitter = "hub_twitter"

    [project.entry-points."hub.platforms"]
    X = "hub_twitter"

The entry point's name is the platform's name in prose ("X", "email", "the terminal"); its
value ties it to the extension. Only metadata is read, nothing is imported, so ``hub --help``
can list the platforms without loading discord.py and the rest. This is the one list of
platforms: the help, the docs and the README are checked against it (tests/docs).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from ..errors import ExtensionError
from ._loader import ENTRY_POINT_GROUP

__all__ = ["PLATFORM_GROUP", "InstalledPlatform", "installed_platforms", "platform_list"]

PLATFORM_GROUP = "hub.platforms"


@dataclass(frozen=True, slots=True)
class InstalledPlatform:
    """One installed platform extension."""

    extension: str
    """Its name in config.toml, ``[extensions.NAME]`` (``twitter``)."""
    title: str
    """Its name as prose writes it, mid-sentence (``X``, ``email``, ``the terminal``)."""
    distribution: str
    """The distribution that installs it (``hub-twitter``)."""

    @property
    def slug(self) -> str:
        """The title as a file name: its page is ``docs/platforms/SLUG.md`` (``x``, ``terminal``)."""
        return _bare(self.title).lower().replace(" ", "-")


def installed_platforms() -> list[InstalledPlatform]:
    """Every installed platform, in alphabetical order of its title (a leading "the" aside).

    Raises:
        ExtensionError: a ``hub.platforms`` entry point names a module that no
            ``hub.extensions`` entry point of its distribution loads, or two name one module.
    """
    extensions: dict[tuple[str, str], str] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        extensions[(_dist(ep), ep.value)] = ep.name
    found: dict[str, InstalledPlatform] = {}
    for ep in importlib.metadata.entry_points(group=PLATFORM_GROUP):
        dist = _dist(ep)
        name = extensions.get((dist, ep.value))
        if name is None:
            raise ExtensionError(
                ep.name,
                f"{dist} names the platform {ep.name!r} in {PLATFORM_GROUP!r} with the module {ep.value!r}, "
                f"but registers no extension with that module in {ENTRY_POINT_GROUP!r}",
            )
        if name in found:
            raise ExtensionError(name, f"two platform names for one extension: {found[name].title!r} and {ep.name!r}")
        found[name] = InstalledPlatform(extension=name, title=ep.name, distribution=dist)
    return sorted(found.values(), key=lambda p: _bare(p.title).casefold())


def platform_list(platforms: list[InstalledPlatform] | None = None) -> str:
    """The titles as one phrase: "Bluesky, Discord, ... and X" (the installed ones by default)."""
    titles = [p.title for p in (installed_platforms() if platforms is None else platforms)]
    if len(titles) < 2:
        return "".join(titles)
    return f"{', '.join(titles[:-1])} and {titles[-1]}"


def _bare(title: str) -> str:
    return title[4:] if title.startswith("the ") else title


def _dist(ep: importlib.metadata.EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else ""
