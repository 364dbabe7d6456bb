"""``python -m hub.cli``: the ``hub`` command."""

from . import main

raise SystemExit(main())
