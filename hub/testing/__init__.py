"""What tests of the hub and of extensions need: a scripted model and loopback fakes.

- [`ScriptedModel`][hub.ScriptedModel]: the model, scripted; streams its responses in awkward chunks.
- [`FakeServer`][hub.testing.FakeServer]: the base of every loopback fake of a remote API (a real aiohttp
  server on 127.0.0.1), with a request log, failure injection (``fail_next``) and waits;
  [`loopback_resolver()`][hub.testing.loopback_resolver] points a platform's media host names at such a fake.
- [`FakeOpenAI`][hub.testing.FakeOpenAI]: OpenAI's chat completions, for the real ``openai`` client (also the
  server the benchmarks run against: ``python -m hub.testing.openai``); [`tool_turn()`][hub.testing.tool_turn]
  scripts an answer of native tool calls, streamed as the API streams them.
- ``hub.testing.telegram``: ``FakeTelegram``, the Bot API for python-telegram-bot (its ``base_url``
  and ``base_file_url``), with Telegram's markup check and 4,096-character limit.
- ``hub.testing.discord``: ``FakeDiscord``, REST v10 and the gateway websocket for discord.py
  (``attach(monkeypatch)`` points the library at it), interactions and the CDN.
- ``hub.testing.slack``: ``FakeSlack``, the Web API (its ``api_url`` is slack-sdk's ``base_url``) and
  Socket Mode for slack-bolt, redelivering unacknowledged envelopes.
- ``hub.testing.matrix``: ``FakeMatrix``, a homeserver's client-server API for matrix-nio (its
  ``base_url`` is the ``homeserver``).
- ``hub.testing.twitter``: ``FakeTwitter``, X's API v2 for tweepy's ``AsyncClient``
  (``patch_async_client``), with X's rate-limit windows and weighted length.
- ``hub.testing.whatsapp``: ``FakeWhatsApp``, Meta's Graph API for the real ``pywa_async`` client
  and the signed webhooks Meta sends (also a program for the WhatsApp quick start:
  ``python -m hub.testing.whatsapp``).
- ``hub.testing.signal``: ``FakeSignal``, signal-cli-rest-api in json-rpc mode (its REST endpoints and
  the receive websocket, with signal-cli's envelopes), for a real aiohttp client (also a program for
  the Signal quick start: ``python -m hub.testing.signal``).
- ``hub.testing.email``: a real Dovecot in a temporary folder (``Dovecot``) and a real SMTP server
  (``SmtpSink``, aiosmtpd) on loopback, for the email extension (also a program for its quick
  start: ``python -m hub.testing.email``).
- ``hub.testing.audio``: real audio made at test time with PyAV (``ogg_opus``, ``audio_bytes`` in
  OGG/Opus, M4A/AAC, MP3, WAV or WebM, ``silence``, ``lying_wav``), for voice; ``FakeOpenAI``
  serves ``/v1/audio/transcriptions`` and ``/v1/audio/speech`` with it.
- ``hub.testing.processes``: ``hub run`` as a real process for the SIGKILL tests
  (``write_hub_config``, ``start_hub``, ``stop_hub``, ``until_model_asked``, ``free_port``).
- ``hub.testing.quickstart``: a platform's quick start followed as the docs write it (the
  section, its TOML and exports, the fake's command run as a program, the test's config).
- ``hub.testing.mastodon`` and ``hub.testing.bluesky``: ``FakeMastodon`` (with its streaming API)
  and ``FakeBluesky`` (a PDS's XRPC), for Mastodon.py and the atproto SDK.
- [`temp_config()`][hub.testing.temp_config]: a config on a test's temporary folder (data, personas), episodic memory off.
- [`memory_store_on()`][hub.testing.memory_store_on]: the hub's memory store, shared by every worker, on
  each backend (in memory, SQLite, PostgreSQL), for tests of what an extension keeps there.
- [`png()`][hub.testing.png] and [`image_bytes()`][hub.testing.image_bytes]: picture files to attach, drawn with Pillow.
- ``hub.testing.fixtures``: autouse pytest fixtures (no network, logging restored) to import into
  a ``conftest.py``.
- ``hub.testing.postgres``: a PostgreSQL schema of its own per test (``[store] url``), dropped
  after it; skipped with the reason where no server answers, failed where ``CI`` is set.

Nothing here talks to the network, and nothing in the core imports this package.
"""

from typing import TYPE_CHECKING, Any

from ..models.scripted import ScriptedModel
from .config import temp_config
from .fakes import Failure, FakeServer, Recorded, loopback_resolver
from .pictures import image_bytes, png
from .stores import memory_store_on

if TYPE_CHECKING:
    # what __getattr__ below imports when asked for, named here for type checkers and for the
    # API reference (griffe reads this block), which would otherwise not see these names
    from .openai import FakeOpenAI, Script, ToolTurn, closed_port, load_script, tool_turn

__all__ = [
    "Failure",
    "FakeOpenAI",
    "FakeServer",
    "Recorded",
    "Script",
    "ScriptedModel",
    "ToolTurn",
    "closed_port",
    "image_bytes",
    "load_script",
    "loopback_resolver",
    "memory_store_on",
    "png",
    "temp_config",
    "tool_turn",
]


def __getattr__(name: str) -> Any:
    # hub.testing.openai is also a program (python -m hub.testing.openai): imported when
    # asked for, so that running it does not import it twice
    if name in ("FakeOpenAI", "Script", "ToolTurn", "closed_port", "load_script", "tool_turn"):
        from . import openai

        return getattr(openai, name)
    raise AttributeError(f"module 'hub.testing' has no attribute {name!r}")
