"""Notebook 06, state in production: one module per lesson, composed by state_in_production.

    state_growth    stores without TTL
    state_restore   the restore after a crash (state_restore_apps runs the apps, state_restore_analysis reads
                    their evidence, state_restore_report presents it)
    rocksdb_memory  RocksDB memory, default against bounded
    changelog_api   changelogs that are not an API (changelog_api_analysis, changelog_api_report)
    disk_space      a store that fills RocksDB's space limit, and its restarts
"""
