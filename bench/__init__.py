"""`make bench`: how close the service is to the least it could cost (see BENCHMARKS.md).

Not part of the Lambda bundle: the functions' CodeUri is ``src/``; this package lives at the repo root.
"""

SCHEMA = "smgov.bench/1"
