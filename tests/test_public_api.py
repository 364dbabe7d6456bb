"""The public surface is hub/__init__.py's __all__, and every name in it exists."""

import hub


def test_all_names_exist_and_are_sorted() -> None:
    for name in hub.__all__:
        assert hasattr(hub, name), name
    assert list(hub.__all__) == sorted(hub.__all__)


def test_error_tree_is_rooted_at_huberror() -> None:
    for name in (
        "ConfigError",
        "ExtensionError",
        "ExtensionFailed",
        "ParseError",
        "ModelError",
        "StoreError",
        "ActionError",
        "RunError",
    ):
        assert issubclass(getattr(hub, name), hub.HubError)
    assert not issubclass(hub.RetryAction, hub.HubError)


def test_core_never_names_a_platform() -> None:
    from pathlib import Path

    core = Path(hub.__file__).parent
    for path in core.rglob("*.py"):
        text = path.read_text()
        for platform in ('"telegram', '"discord', '"twitter', "'telegram", "'discord", "'twitter"):
            assert f"== {platform}" not in text and f"== {platform}" not in text, f"{path} branches on a platform"
