"""`python -m lab ...`: the lab's commands (lab.commands.main)."""
from .commands.main import main

if __name__ == "__main__":   # not when a spawned process (make site's) imports it as its parent's main module
    main()
