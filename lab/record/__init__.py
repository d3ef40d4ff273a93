"""What a run leaves behind: the `LAB {json}` evidence lines every program writes (evidence), ground-truth and app
histories (history), the generated input (generator), a notebook's recorded results (recorded) and the quiet logs
(logs). Imports nothing of the lab but its base files (config, errors, connection)."""
