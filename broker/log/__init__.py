"""The log storage engine: segments, sparse indexes, checkpoints, leader epochs, recovery.

Plain, synchronous file IO (no trio, no sockets). Time is passed in as `now_ms`.
"""
