"""Helpers the core's tests share across folders; what an extension's tests could use too
lives in ``hub.testing`` instead. Each folder's ``conftest.py`` holds the fixtures it needs.

- ``backends``: the store backends a contract suite runs on, and a SQL database of each.
- ``browser``: headless Chromium for Playwright (where it is, how it is launched), and the
  mark that skips the browser tests where it is missing (an error under CI).
- ``chat``: the recording test platform (``test:chat``), a model that echoes the newest
  input, and the fixtures of hubs built on them (imported by the conftests that use them).
- ``clock``: a wall clock that moves only when a test says so.
- ``processes``: the ``hub`` command as a real process, and a project folder for it.
- ``rig``: a hub with the terminal extension, its printed output and its model.
"""
