"""Start-up: chromadb is imported in a worker thread, and it imports httpx. If the
loop's thread imports httpx at that moment (an HTTP client being built), one of the two
can be handed the module half loaded. The store imports httpx on the calling thread
first, so the worker thread only ever finds it loaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A fresh interpreter (this one has long imported httpx): a finder on sys.meta_path sees
# the moment chromadb starts being imported, and records which thread does it and
# whether httpx was already complete then.
_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, threading

    seen = []

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name == "chromadb":
                httpx = sys.modules.get("httpx")
                seen.append((
                    threading.current_thread() is threading.main_thread(),
                    httpx is not None and hasattr(httpx, "AsyncClient"),
                ))
            return None

    sys.meta_path.insert(0, Watch())
    assert "httpx" not in sys.modules and "chromadb" not in sys.modules

    from hub.memory import ChromaVectorStore, HashEmbedder

    async def main():
        store = ChromaVectorStore(sys.argv[1], embedder=HashEmbedder())
        async with store:
            await store.create_index("probe")

    asyncio.run(main())
    print(seen[0])
    """
)


def test_httpx_is_loaded_before_chromadb_is_imported_in_a_thread(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "chroma")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    on_main_thread, httpx_complete = eval(out.stdout.strip().splitlines()[-1])
    assert not on_main_thread  # chromadb's import stays off the loop (it costs most of a second)
    assert httpx_complete, "chromadb was imported in a thread while httpx was not yet loaded"
