"""Scenarios of a deployed hub that no one package owns: the container files (Dockerfile,
compose) and SIGTERM to a real `hub run` process."""
