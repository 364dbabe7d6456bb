"""The installed platforms, read from packages' metadata (hub/definitions/_platforms.py): real
dist-info folders in a temporary directory stand in for installed packages."""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
from pathlib import Path

import pytest

from hub.cli import main
from hub.definitions import InstalledPlatform, installed_platforms, platform_list
from hub.errors import ExtensionError


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packages: dict[str, str]) -> None:
    """Only ``packages`` (distribution name: its entry_points.txt) are installed."""
    dists = []
    for name, entry_points in packages.items():
        info = tmp_path / f"{name.replace('-', '_')}-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
        (info / "entry_points.txt").write_text(entry_points)
        dists.append(importlib.metadata.PathDistribution(info))

    def entry_points(*, group: str) -> importlib.metadata.EntryPoints:
        return importlib.metadata.EntryPoints(ep for d in dists for ep in d.entry_points if ep.group == group)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def platform(name: str, title: str) -> str:
    return f"[hub.extensions]\n{name} = hub_{name}\n\n[hub.platforms]\n{title} = hub_{name}\n"


def help_text() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    return " ".join(out.getvalue().split())


def test_each_platform_by_its_title_in_order_a_leading_the_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(
        tmp_path,
        monkeypatch,
        {
            "hub-twitter": platform("twitter", "X"),
            "hub-cli": platform("cli", "the terminal"),
            "hub-email": platform("email", "email"),
            "hub-weather": "[hub.extensions]\nweather = hub_weather\n",  # actions only: no platform
        },
    )
    assert installed_platforms() == [
        InstalledPlatform(extension="email", title="email", distribution="hub-email"),
        InstalledPlatform(extension="cli", title="the terminal", distribution="hub-cli"),
        InstalledPlatform(extension="twitter", title="X", distribution="hub-twitter"),
    ]
    assert [p.slug for p in installed_platforms()] == ["email", "terminal", "x"]
    assert platform_list() == "email, the terminal and X"
    assert "An LLM agent on email, the terminal and X." in help_text()


def test_the_list_reads_as_prose_for_one_or_two() -> None:
    one = InstalledPlatform(extension="a", title="Alpha", distribution="hub-a")
    two = InstalledPlatform(extension="b", title="Beta", distribution="hub-b")
    assert platform_list([one]) == "Alpha" and platform_list([one, two]) == "Alpha and Beta"
    assert platform_list([]) == ""


def test_a_platform_name_without_its_extension_is_an_error_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(
        tmp_path,
        monkeypatch,
        {"hub-zulip": "[hub.extensions]\nzulip = hub_zulip\n\n[hub.platforms]\nZulip = hub_zulp\n"},
    )
    with pytest.raises(ExtensionError, match=r"hub-zulip names the platform 'Zulip'.*'hub_zulp'.*hub\.extensions"):
        installed_platforms()
    # the help still works, and says why it cannot list them
    assert "their list is unreadable" in help_text() and "hub_zulp" in help_text()


def test_another_package_cannot_name_a_platform_it_does_not_ship(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(
        tmp_path,
        monkeypatch,
        {"hub-slack": platform("slack", "Slack"), "squatter": "[hub.platforms]\nSlock = hub_slack\n"},
    )
    with pytest.raises(ExtensionError, match="squatter names the platform 'Slock'"):
        installed_platforms()


def test_two_names_for_one_extension_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, monkeypatch, {"hub-x": platform("twitter", "X") + "Twitter = hub_twitter\n"})
    with pytest.raises(ExtensionError, match="two platform names for one extension: 'X' and 'Twitter'"):
        installed_platforms()


def test_with_no_platform_installed_the_help_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, monkeypatch, {})
    assert installed_platforms() == []
    assert "no platform is installed" in help_text()
