"""Chapter 05, exactly-once under crashes: one lesson notebook each (05a to 05d), each lesson module ending with its
`lesson` (lab.toolbox.lesson.Lesson), its result an EosCrashResult of its own runs.

    crash_points        05a, a crash at each point of the commit, under each guarantee
    exception_handlers  05b, a poison record under each exception handler (and their configuration by version)
    schema_change       05c, a changed state schema
    production_errors   05d, an output record the broker refuses, under the production exception handler
    eos_crashes         what the four share: parameters, rules, the broker they need, their questions
    streams_app         the Java app every run drives: crash points, handlers, schema modes
    crash_loop          a failing app watched as a deployment would (05b to 05d)
    topic_io            reading a topic to its end, writing malformed input
    analysis            pure functions over a run's evidence
    report              EosCrashResult: tables, figures, verdict, evidence, the Spark audit
    exercises           each lesson's exercise
"""
