"""``python -m llassembly_demo``: the demo's command line (see :mod:`llassembly_demo.cli`)."""

from .cli import main

raise SystemExit(main())
