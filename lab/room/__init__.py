"""The room: a workshop's predictions and runs, live on the teacher's page.

- command   `python -m lab room` (`make room`): the teacher starts the room's server and gets the line to hand out
- server    the room's web server (Tornado): learners' messages in, the teacher's page and its live summary out
- store     the room in SQLite: what was sent, kept once, and the summary the page draws
- messages  what a learner's lab may send (a JSON schema) and the course's lessons the room knows
- page/     the teacher's page (static: its script draws the summary, nothing inline, nothing from outside)

The learner's side, what a lab sends and when, is lab.toolbox.room.
"""
