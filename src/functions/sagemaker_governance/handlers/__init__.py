"""Lambda entry points: a few lines each (decorators, parse, call one service)."""
