"""`python -m kvsched_lab`: the same as the `kvsched` command."""
from kvsched_lab.cli import main

raise SystemExit(main())
