"""`python -m lab.doctor ...`: the doctor's own command line (the `kafka-lab-doctor` script; docs/doctor.md)."""
from .cli import main

main()
