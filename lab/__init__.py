"""Kafka Failure Lab. Refuses at import a platform it cannot run on (lab.runtime.platforms)."""
import sys

from .errors import LabError
from .runtime.platforms import platform_problem

# jsonschema, which plotly (through nbformat) and the room import, imports rfc3987_syntax for its "iri" format if it
# is installed (jupyter-events' jsonschema[format-nongpl] installs it), and that builds some 35 Earley parsers at
# import: 2 CPU-s in each kernel on a quiet machine, up to 19 s on a busy one (jsonschema issue 1428). No schema
# the lab meets checks an IRI: the lab's processes go without that checker.
sys.modules.setdefault("rfc3987_syntax", None)

_problem = platform_problem()
if _problem:
    raise LabError(_problem)
