"""``python -m llassembly``: the command line (see :mod:`llassembly.cli`)."""

from .cli import main

raise SystemExit(main())
