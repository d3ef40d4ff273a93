"""Chapter 06, what state costs in production: one lesson notebook each (06a to 06e), one module per lesson, each
ending with its `lesson` (lab.toolbox.lesson.Lesson).

    state_growth     06a, ever-new keys in a store (state_growth_report presents what the stores held)
    state_restore    06b, a restart after a crash (state_restore_apps runs the app, state_restore_analysis reads
                     its restores, state_restore_report presents them)
    rocksdb_memory   06c, the memory RocksDB takes for an app's stores (rocksdb_memory_report presents it)
    changelog_api    06d, a downstream reader of a changelog (changelog_api_analysis, changelog_api_report)
    disk_space       06e, how much disk a store takes
    state_app        what 06a and 06e share: the feed of new keys and the StateGrowthApp
    printed          what every lesson's exercise reads of its notebook: the answers shown above it
"""
