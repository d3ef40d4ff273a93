"""`python -m lab ...`: the lab's commands (lab.commands.main)."""
from .commands.main import main

main()
