"""``python -m torchplace``: the same as the ``torchplace`` console script."""

from torchplace.cli import main

raise SystemExit(main())
