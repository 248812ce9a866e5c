"""The `smgov` command."""
