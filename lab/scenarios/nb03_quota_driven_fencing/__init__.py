"""Notebook 03, quota-driven fencing of exactly-once Kafka Streams.
"""
