"""The entry points: `python -m lab ...` (main), the static site (site), the offline kit (kit) and the pre-flight
(preflight)."""
