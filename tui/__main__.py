"""`python -m tui` runs the corral command line."""

from tui.entry import main

raise SystemExit(main())
