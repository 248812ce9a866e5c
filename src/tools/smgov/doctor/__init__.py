"""`smgov doctor`: read-only checks of a deployed stack in one account and region.

Every check reads what AWS says now (never writes) and reports findings: ``ok``, ``fail`` (something is
wrong: the command exits 1), ``warn`` (worth a look, not wrong by itself) or ``unknown`` (the check could not
run, with the reason: exit 2 when nothing failed). A missing or outdated stack is a finding, never silence.
"""
