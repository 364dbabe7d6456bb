from hub.testing.fixtures import no_network, restore_logging  # noqa: F401  (autouse)
