"""What tests of the hub and of extensions need: a scripted model and loopback fakes.

- :class:`ScriptedModel`: the model, scripted; streams its responses in awkward chunks.
- :class:`FakeServer`: the base of every loopback fake of a remote API (a real aiohttp
  server on 127.0.0.1), with a request log, failure injection (``fail_next``) and waits.
- :class:`FakeOpenAI`: OpenAI's chat completions, for the real ``openai`` client (also the
  server the benchmarks run against: ``python -m hub.testing.openai``).
- ``hub.testing.fixtures``: autouse pytest fixtures (no network, logging restored) to import into
  a ``conftest.py``.

Nothing here talks to the network, and nothing in the core imports this package.
"""

from ..models.scripted import ScriptedModel
from .fakes import Failure, FakeServer, Recorded
from .openai import FakeOpenAI, Script, load_script

__all__ = ["Failure", "FakeOpenAI", "FakeServer", "Recorded", "Script", "ScriptedModel", "load_script"]
