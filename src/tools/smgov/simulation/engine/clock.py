"""The virtual clock: minutes since the scenario's start, and the service's clock in seconds.

The simulation advances in whole minutes. The service's clock is the minute, except that botocore's
retry sleeps (throttling under the CloudWatch quota model or injected throttles) are virtual: they move
the service's clock on in seconds, so it may run ahead of the minute the simulation is in.
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta
from typing import Any


class VirtualClock:
    def __init__(self, epoch: datetime) -> None:
        self.epoch = epoch
        self.now = 0  # the simulation's minute
        self.api_ahead = 0.0  # the service's clock in seconds since the epoch, once botocore backed off
        self.sleeps = 0
        self.backoff_seconds = 0.0
        self.max_lag = 0.0
        self._minutes: dict[int, datetime] = {}  # minute -> its moment: ``at`` is asked for each datapoint

    def __call__(self) -> datetime:
        """The service's clock (what the handlers read as "now")."""
        if self.api_ahead > self.now * 60:  # only after botocore backed off (the quota model)
            return self.epoch + timedelta(seconds=self.api_ahead)
        return self.epoch + timedelta(minutes=self.now)

    def at(self, minute: int) -> datetime:
        """The moment of ``minute`` (kept: a fleet run asks for the same few thousand minutes about a million
        times, one per datapoint and log line it answers; a datetime is immutable, so the same one serves)."""
        moment = self._minutes.get(minute)
        if moment is None:
            moment = self._minutes[minute] = self.epoch + timedelta(minutes=minute)
        return moment

    def api_seconds(self) -> float:
        """The service's clock in seconds since the epoch: the minute, or later after backoff sleeps."""
        return max(float(self.now * 60), self.api_ahead)

    def backoff(self, seconds: float) -> None:
        """botocore sleeps between retries: virtual time passes for the service."""
        self.api_ahead = self.api_seconds() + seconds
        self.sleeps += 1
        self.backoff_seconds += seconds
        self.max_lag = max(self.max_lag, self.api_ahead - self.now * 60)

    def retry_summary(self) -> dict[str, Any]:
        return {
            "retry_sleeps": self.sleeps,
            "backoff_seconds": round(self.backoff_seconds, 3),
            "max_lag_seconds": round(self.max_lag, 3),
        }


class Uuids:
    """Every id of a run (event ids, SNS message ids, request ids) from one seeded stream."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"uuid-{seed}")

    def next(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
