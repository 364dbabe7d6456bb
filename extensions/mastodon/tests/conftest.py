from hub.testing.fixtures import _no_network, _restore_logging  # noqa: F401  (autouse)
