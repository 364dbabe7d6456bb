"""A hub's config on a test's temporary folder, so that a test never writes to the checkout."""

from __future__ import annotations

from pathlib import Path

from ..config import HubConfig

__all__ = ["temp_config"]


def temp_config(root: Path | str, *, persona: str | None = None) -> HubConfig:
    """A config whose files all live under ``root`` (a test's ``tmp_path``).

    The data dir is ``root/data``; the persona folder ``root/contexts`` is made, with
    ``persona`` (the text of a persona file) as its ``default.toml`` when given. Episodic
    memory is off: Chroma and the embedder take seconds to start, and a test of episodes
    turns it on. Everything else is the default; set what a test needs on the result.
    """
    root = Path(root)
    contexts = root / "contexts"
    contexts.mkdir(parents=True, exist_ok=True)
    if persona is not None:
        (contexts / "default.toml").write_text(persona, encoding="utf-8")
    cfg = HubConfig()
    cfg.hub.data_dir = str(root / "data")
    cfg.hub.contexts_dir = str(contexts)
    cfg.memory.episodes = False
    return cfg
