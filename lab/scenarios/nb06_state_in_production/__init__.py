"""Notebook 06, state in production: one module per lesson, composed by state_in_production.

    state_growth   stores without TTL
    state_restore  the restore after a crash
    rocksdb_memory RocksDB memory, default against bounded
    changelog_api  changelogs that are not an API
"""
