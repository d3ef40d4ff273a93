"""Kafka Failure Lab. Refuses at import a platform it cannot run on (lab.runtime.platforms)."""
from .errors import LabError
from .runtime.platforms import platform_problem

_problem = platform_problem()
if _problem:
    raise LabError(_problem)
