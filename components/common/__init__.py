"""Pieces shared by every tfx-distillery component and module file."""
