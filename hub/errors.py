"""The hub's error tree (placeholder: the lead's version on main replaces this file)."""


class HubError(Exception):
    """Root of every error the hub raises on purpose."""


class StoreError(HubError):
    """A store (memory, vector, runs) could not do what was asked."""
