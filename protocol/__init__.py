"""Highwater's wire protocol: framing, versioned message schemas and record batches.

Pure code (stdlib + msgpack + crc32c + compression codecs): no sockets, no trio, no clocks.
See docs/protocol.md for the byte-level specification.
"""
