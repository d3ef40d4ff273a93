"""What runs the lab's programs: child processes that die with the lab (processes, reaper), which Java (jvm), jars
pinned and fetched (maven), Java programs compiled and started at any Kafka version (programs, class_archives),
the platform rules (platforms), Kafka version parsing (versions) and free ports (ports). Imports nothing above it
but the record room."""
