"""The hub's errors, one tree rooted at [`HubError`][hub.HubError].

::

    HubError
    ├── ConfigError        config.toml or a persona file is invalid (names the file and key)
    ├── ExtensionError     an extension could not be found, validated or started
    │   └── ExtensionFailed    its own code raised while loading or starting
    ├── ParseError         model output that cannot be understood (never raised by the streaming parser)
    ├── ModelError         the model could not be reached or answered with an error
    │   ├── ModelUnavailable   retries exhausted: the run fails with this reason
    │   └── ContextTooLong     the prompt is over the model's context window (compaction, never failover)
    ├── StoreError         a store (SQLite, Chroma) could not be opened or written
    ├── ActionError        an action call was invalid or its handler failed (shown to the model)
    ├── MediaError         a picture or file could not be fetched, read or sent (hub/media.py)
    │   ├── MediaTooLarge      over [media] max_bytes, or a platform's limit
    │   └── MediaRefused       a decompression bomb, an archive or executable, unreadable content
    └── RunError           misuse of the run API (unknown context, hub not started)

Signals that steer the loop ([`RetryAction`][hub.RetryAction]) are deliberately outside the tree.
"""

from __future__ import annotations

__all__ = [
    "HubError",
    "ConfigError",
    "ExtensionError",
    "ExtensionFailed",
    "ParseError",
    "ModelError",
    "ModelUnavailable",
    "ContextTooLong",
    "StoreError",
    "ActionError",
    "RunError",
    "RetryAction",
    "MediaError",
    "VoiceError",
    "MediaTooLarge",
    "MediaRefused",
]


class HubError(Exception):
    """Base of every error the hub raises on purpose."""


class ConfigError(HubError):
    """Invalid configuration; the message names the file and the key at fault."""

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None) -> None:
        self.path = path
        """The file at fault, if known."""
        self.key = key
        """The dotted key at fault (``model.max_tokens``), if known."""
        where = ""
        if path and key:
            where = f"{path}: {key}: "
        elif path:
            where = f"{path}: "
        elif key:
            where = f"{key}: "
        super().__init__(f"{where}{message}")


class ExtensionError(HubError):
    """An extension could not be found, validated or started."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        """The extension's name."""
        super().__init__(f"extension {name!r}: {message}")


class ExtensionFailed(ExtensionError):
    """An extension's own code raised; the original is chained and kept."""

    def __init__(self, name: str, original: BaseException) -> None:
        self.original = original
        """The exception its code raised (also chained as ``__cause__``)."""
        super().__init__(name, f"{type(original).__name__}: {original}")


class ParseError(HubError):
    """Model output that could not be interpreted."""


class ModelError(HubError):
    """The model answered with an error, or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        self.status = status
        """The HTTP status the model's server answered, if any."""
        self.retryable = retryable
        """Whether trying again may succeed (a timeout, a 429, a 5xx): the hub retries, then fails over."""
        super().__init__(message)


class ModelUnavailable(ModelError):
    """Retries are exhausted; the run fails with this reason."""


class ContextTooLong(ModelError):
    """The model refused the prompt as longer than its context window (OpenAI's
    ``context_length_exceeded``, and the phrasings of compatible servers: see
    `hub.models.context_too_long()`). Never retried as is and never a reason to fail
    over to another model: with ``[agent] compaction`` the engine summarises the oldest
    history and asks again, once."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, status=status, retryable=False)


class StoreError(HubError):
    """A store could not be opened, read or written. ``store`` and ``operation`` name what
    failed below the stores (the backend or the table, and ``open``, ``read``, ``write``);
    ``during`` the store operation it broke, as ``STORE.OPERATION`` (``"inbox.record"``), once
    a store passes it on. Code decides on this type, never on the text: a run the store
    failed is retried once the store is back, and never counted against its input."""

    def __init__(
        self, message: str, *, store: str | None = None, operation: str | None = None, during: str | None = None
    ) -> None:
        self.store = store
        """The backend or table that failed (``sqlite``, ``postgres``), if known."""
        self.operation = operation
        """What failed there (``open``, ``read``, ``lock``, ``migrate``, ...), if known."""
        self.during = during
        """The store operation it broke, ``STORE.OPERATION`` (``inbox.record``), once a store named it."""
        super().__init__(message)

    def within(self, store: str, operation: str) -> StoreError:
        """Name the store operation this broke (``"inbox"``, ``"record"``); a store that called
        another names it over that one. Returns the error itself, to be raised again."""
        self.during = f"{store}.{operation}"
        return self


class ActionError(HubError):
    """An action call was invalid or its handler failed. The model sees the message."""

    def __init__(self, action: str, message: str) -> None:
        self.action = action
        """The action's name."""
        super().__init__(f"action {action!r}: {message}")


class RunError(HubError):
    """Misuse of the run API: unknown context type, hub not started, bad context reference."""


class RetryAction(Exception):
    """Raised by an action handler to ask for another attempt (bounded by the action's ``retry``)."""


class MediaError(HubError):
    """A picture or file could not be fetched, read or sent. ``reason`` is the short, safe
    sentence a user may be shown ("it is 12.4 MB, over the 10 MB limit")."""

    def __init__(self, reason: str, *, name: str = "") -> None:
        self.reason = reason
        """The short, safe sentence a user may be shown."""
        self.name = name
        """The file's display name (never a path), if it has one."""
        super().__init__(f"{name}: {reason}" if name else reason)


class VoiceError(HubError):
    """A voice note could not be transcribed, or a reply spoken: the audio server failed,
    hung or refused. ``reason`` is the short, safe sentence a user may be shown."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class MediaTooLarge(MediaError):
    """Over ``[media] max_bytes`` (or a platform's own limit): never fetched whole, never sent."""


class MediaRefused(MediaError):
    """Content the hub never passes on: a decompression bomb, an archive or an executable,
    a type it cannot read, or a path or URL the operator did not allow."""
