"""Inbound contracts: the events our functions accept, modelled with Powertools' parser models.

One module per function, so that each function builds the pydantic models of its own events only (cold
start, BENCHMARKS.md): ``job_state`` (the job-events function: ``SageMaker Training Job State Change``),
``alarms`` (the guard stopper: CloudWatch alarm notifications through SNS), ``schedule`` (the reconciler's
``Scheduled Event``); ``queue`` tells an SQS batch (both event-driven functions read a queue, issue 16
item 2) from a direct event. This package itself imports nothing.

A malformed event or record raises ``pydantic.ValidationError``: the record (or the invocation) fails, is
retried, then ends in the dead-letter queue. Nothing is silently dropped.
"""
