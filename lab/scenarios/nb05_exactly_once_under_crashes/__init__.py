"""Notebook 05, exactly-once under crashes, exception handlers, and an output the broker refuses.

    eos_crashes         the scenario: SPEC, needs, run (composes the parts below)
    streams_app         the Java app every run drives: crash points, handlers, schema modes
    crash_points        a crash at each point of the commit, under each guarantee
    crash_loop          a failing app watched as a deployment would (handler, production-error, schema runs)
    exception_handlers  the handlers' configuration by version
    production_errors   an output record the broker refuses, under the production exception handler
    schema_change       a changed state schema
    topic_io            reading a topic to its end, writing malformed input
    analysis            pure functions over a run's evidence
    report              EosCrashResult: tables, figures, verdict, exercises
"""
