"""`python -m kvsched_lab`: the same as the `kvsched` command."""
from kvsched_lab.cli.main import main

raise SystemExit(main())
