"""`python -m corral.tui.cli …` is the `corral` command (agent hooks run it)."""

from corral.tui.cli.main import main

raise SystemExit(main())
