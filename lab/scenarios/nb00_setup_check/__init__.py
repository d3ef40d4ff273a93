"""Notebook 00, the setup check: Java, a broker, clients, Spark and the audit, all real.
"""
