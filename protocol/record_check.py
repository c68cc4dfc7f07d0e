"""The leader's check of a produced batch's records section (Kafka's LogValidator record pass):
it decompresses within MAX_DECOMPRESSED_BYTES and decodes as docs/protocol.md §6.6 says, the
count matches the header, the offset deltas run 0, 1, 2, ... and the largest timestamp is the
header's max_timestamp. Objects are built at most `max_record_bytes` of msgpack at a time;
docs/reliability.md ("No poison batches") has the bounds and the measured cost.
"""

from __future__ import annotations

import itertools
from typing import Any, Final, NoReturn

import msgpack

from protocol.compression import MAX_DECOMPRESSED_BYTES, decompress
from protocol.errors import CorruptRecordError, InvalidRecordError
from protocol.records import BATCH_HEADER_BYTES, COMPRESSION_MASK, BatchHeader

__all__ = ["check_records"]

_EMPTY: Final = ()
# The smallest record: [ts, offset, nil, nil, []] = 95 00 00 c0 c0 90.
_MIN_RECORD_BYTES: Final = 6
_FEED_BYTES: Final = 256 * 1024
_UNPACK_ERRORS: Final = (ValueError, TypeError, msgpack.exceptions.UnpackException)


def check_records(
    buf: bytes | memoryview,
    pos: int,
    header: BatchHeader,
    *,
    max_record_bytes: int,
    keyed: bool = False,
) -> None:
    """Raise CorruptRecordError (does not decompress or decode) or InvalidRecordError (decodes,
    but disagrees with the header) for the batch at `pos` of `buf`, whose header is checked
    already (CRC, counts, codec). `max_record_bytes` bounds one record's msgpack encoding
    (the broker passes max.message.bytes: a record that could not travel uncompressed).
    `keyed`: a record without a key is refused (InvalidRecordError), as a compacted topic's."""
    view = buf if type(buf) is memoryview else memoryview(buf)
    section: Any = view[pos + BATCH_HEADER_BYTES : pos + header.batch_length + 12]
    if header.attributes & COMPRESSION_MASK:
        try:
            section = decompress(header.compression, section, MAX_DECOMPRESSED_BYTES)
        except CorruptRecordError as exc:
            _corrupt(pos, exc.message)
    count = header.record_count
    if count * _MIN_RECORD_BYTES > len(section):
        _corrupt(pos, f"record_count {count} cannot fit in {len(section)} bytes of records")
    if len(section) <= max_record_bytes:
        try:
            entries = msgpack.unpackb(
                section,
                raw=False,
                use_list=False,
                max_array_len=len(section),
                max_map_len=0,
                max_ext_len=0,
            )
        except msgpack.exceptions.ExtraData as exc:
            _corrupt(pos, f"{len(exc.extra)} bytes after the last record")
        except _UNPACK_ERRORS as exc:
            _corrupt(pos, f"records section does not decode: {exc!r}")
        if type(entries) is not tuple or len(entries) != count:
            _corrupt(pos, f"records section is not an array of record_count {count} records")
        largest = _check_entries(entries, 0, pos, keyed)
    else:
        largest = _check_streamed(section, count, pos, max_record_bytes, keyed)
    if header.base_timestamp + largest != header.max_timestamp:
        raise InvalidRecordError(
            f"batch at byte {pos}: max_timestamp {header.max_timestamp} is not the largest "
            f"record timestamp {header.base_timestamp + largest}"
        )


def _check_streamed(section: Any, count: int, pos: int, max_record_bytes: int, keyed: bool) -> int:
    """A records section larger than one record may be: decoded `max_record_bytes` at a time,
    so the objects alive at once stay bounded whatever the section holds."""
    unpacker = msgpack.Unpacker(
        raw=False,
        use_list=False,
        max_buffer_size=max_record_bytes,
        max_map_len=0,
        max_ext_len=0,
    )
    size = len(section)
    fed = min(size, max_record_bytes)
    largest = -(1 << 63)
    index = 0
    try:
        unpacker.feed(section[:fed])
        if unpacker.read_array_header() != count:
            _corrupt(pos, f"records section is not an array of record_count {count} records")
        while index < count:
            entries = tuple(itertools.islice(unpacker, count - index))
            if entries:
                largest = max(largest, _check_entries(entries, index, pos, keyed))
                index += len(entries)
                continue
            room = max_record_bytes - (fed - unpacker.tell())
            if fed == size:
                _corrupt(pos, f"records section ends inside record {index}")
            if room <= 0:
                _corrupt(pos, f"record {index} is larger than {max_record_bytes} bytes")
            more = min(room, _FEED_BYTES, size - fed)
            unpacker.feed(section[fed : fed + more])
            fed += more
    except _UNPACK_ERRORS as exc:
        _corrupt(pos, f"records section does not decode at record {index}: {exc!r}")
    if unpacker.tell() != size:
        _corrupt(pos, f"{size - unpacker.tell()} bytes after the last record")
    return largest


def _check_entries(entries: tuple[Any, ...], first: int, pos: int, keyed: bool) -> int:
    """The largest timestamp delta of these records (the first is record `first`), or the
    error of the first bad one. The loop is the good path; `_raise_bad_record` names faults."""
    index = first
    largest = -(1 << 63)
    try:
        for ts_delta, offset_delta, key, value, headers in entries:
            if (
                type(ts_delta) is not int
                or type(offset_delta) is not int
                or offset_delta != index
                or not (key is None or type(key) is bytes)
                or not (value is None or type(value) is bytes)
                or (headers is not _EMPTY and not _headers_ok(headers))
            ):
                break
            if ts_delta > largest:
                largest = ts_delta
            index += 1
        else:
            if keyed:
                _check_keys(entries, first, pos)
            return largest
    except (TypeError, ValueError):
        pass  # a record that is not an array of 5
    _raise_bad_record(entries[index - first], index, pos)


def _check_keys(entries: tuple[Any, ...], first: int, pos: int) -> None:
    for index, entry in enumerate(entries, first):
        if entry[2] is None:
            raise InvalidRecordError(
                f"batch at byte {pos}: record {index} has no key; a compacted topic accepts "
                "only keyed records"
            )


def _headers_ok(headers: Any) -> bool:
    return type(headers) is tuple and all(
        type(h) is tuple
        and len(h) == 2
        and type(h[0]) is str
        and (h[1] is None or type(h[1]) is bytes)
        for h in headers
    )


def _raise_bad_record(entry: Any, index: int, pos: int) -> NoReturn:
    where = f"batch at byte {pos}: record {index}"
    if type(entry) is not tuple or len(entry) != 5:
        _corrupt(pos, f"record {index} is not an array of 5")
    ts_delta, offset_delta, key, value, headers = entry
    if type(ts_delta) is not int or type(offset_delta) is not int:
        _corrupt(pos, f"record {index}: timestamp and offset deltas must be integers")
    if not (key is None or type(key) is bytes) or not (value is None or type(value) is bytes):
        _corrupt(pos, f"record {index}: key and value must be bin or nil")
    if headers is not _EMPTY and not _headers_ok(headers):
        _corrupt(pos, f"record {index}: headers must be an array of [str, bin | nil]")
    raise InvalidRecordError(f"{where}: offset delta {offset_delta}, expected {index}")


def _corrupt(pos: int, what: str) -> NoReturn:
    raise CorruptRecordError(f"batch at byte {pos}: {what}")
