"""`python -m corral.tui` runs the corral command line."""

from corral.tui.cli.main import main

raise SystemExit(main())
