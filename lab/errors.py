class LabError(RuntimeError):
    """A problem the user can fix; the message says how."""
