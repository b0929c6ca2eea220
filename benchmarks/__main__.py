"""``python -m benchmarks``: run the whole benchmark report (see :mod:`benchmarks.run`)."""

from .run import main

raise SystemExit(main())
