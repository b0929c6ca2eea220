"""Example tools and plans for the command line (run from the repository root)."""
