"""``python -m llassembly``: the command line (see :mod:`llassembly.cli`)."""

from llassembly.cli import main

raise SystemExit(main())
