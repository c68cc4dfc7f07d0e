"""The broker's settings: the table, server.properties, topic configs and live
changes (docs/operations.md; docs/architecture.md lists each module).
"""
