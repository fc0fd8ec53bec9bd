"""`python -m tui` runs the corral command line."""

from corral.tui.entry import main

raise SystemExit(main())
