"""One module per CLI subcommand (see harness/cli.py)."""
