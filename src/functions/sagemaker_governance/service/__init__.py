"""Use cases: fetch -> decide (domain) -> act (through ports) -> audit."""
