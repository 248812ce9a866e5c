"""Alarm guards: each one domain module (``idle.py``, ``progress.py``) on the shared shape of
``base.py``, registered in ``registry.py``."""
