"""The tfx-distillery pipeline, its runners and the `distillery` command."""
