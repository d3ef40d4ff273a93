"""Notebook 05, exactly-once under crashes and exception handlers.

    eos_crashes         the scenario: SPEC, needs, run (composes the parts below)
    streams_app         the Java app every run drives: crash points, handlers, schema modes
    crash_points        a crash at each point of the commit, under each guarantee
    crash_loop          a poison record's crash loop, and the schema change's
    exception_handlers  the handlers' configuration by version
    schema_change       a changed state schema
    topic_io            reading a topic to its end, writing malformed input
    analysis            pure functions over a run's evidence
    report              EosCrashResult: tables, figures, verdict, exercises
"""
