/* A Highwater records section (msgpack) straight to Kafka's v2 records section, for the Kafka
 * listener's Fetch, and back, for its Produce (protocol/kafka/records.py has the Python paths,
 * through aiokafka's codec, and they are the reference: differential tests hold each pair to
 * the same bytes).
 *
 * The section is an array of `count` entries [timestamp_delta, offset_delta, key bin|nil,
 * value bin|nil, [[header key str, header value bin|nil], ...]]; each becomes Kafka's record:
 * varint length, int8 attributes (0), varlong timestamp delta, varint offset delta, varint
 * key length (-1: null) and key, the same for the value, varint header count, headers. The
 * deltas are relative to the batch header's fields, which both formats share. Anything else
 * (a shape this does not know, a length past the end) returns None: the caller then takes
 * the Python path, which names the error. Every length is checked before it is used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_msgpack_read.h"

static int read_array(cursor *c, uint32_t *count) {
    uint64_t n;
    if (!read_array_header(c, &n) || n > UINT32_MAX) return 0;
    *count = (uint32_t)n;
    return 1;
}

static size_t varint_size(int64_t value) {
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63); /* zigzag */
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

static uint8_t *put_varint(uint8_t *out, int64_t value) {
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (v >= 0x80) { *out++ = (uint8_t)(v | 0x80); v >>= 7; }
    *out++ = (uint8_t)v;
    return out;
}

static size_t bytes_size(const uint8_t *start, uint32_t length) {
    return start == NULL ? varint_size(-1) : varint_size(length) + length;
}

static uint8_t *put_bytes(uint8_t *out, const uint8_t *start, uint32_t length) {
    if (start == NULL) return put_varint(out, -1);
    out = put_varint(out, length);
    memcpy(out, start, length);
    return out + length;
}

/* One entry: its Kafka record written at *out (if out is not NULL); its size in *size. */
static int entry(cursor *c, uint8_t **out, size_t *size) {
    uint32_t fields, headers;
    int64_t ts_delta, offset_delta;
    const uint8_t *key, *value;
    uint32_t key_length, value_length;
    if (!read_array(c, &fields) || fields != 5) return 0;
    if (!read_int(c, &ts_delta) || !read_int(c, &offset_delta)) return 0;
    if (offset_delta < 0 || offset_delta > INT32_MAX) return 0;
    if (!read_bin(c, &key, &key_length) || !read_bin(c, &value, &value_length)) return 0;
    if (!read_array(c, &headers)) return 0;
    cursor first = *c;
    size_t body = 1 + varint_size(ts_delta) + varint_size(offset_delta)
                  + bytes_size(key, key_length) + bytes_size(value, value_length)
                  + varint_size(headers);
    for (uint32_t i = 0; i < headers; i++) {
        uint32_t pair, hk_length, hv_length;
        const uint8_t *hk, *hv;
        if (!read_array(c, &pair) || pair != 2) return 0;
        if (!read_str(c, &hk, &hk_length) || !read_bin(c, &hv, &hv_length)) return 0;
        body += varint_size(hk_length) + hk_length + bytes_size(hv, hv_length);
    }
    if (body > INT32_MAX) return 0;
    *size = varint_size((int64_t)body) + body;
    if (out == NULL) return 1;
    uint8_t *w = put_varint(*out, (int64_t)body);
    *w++ = 0; /* attributes */
    w = put_varint(w, ts_delta);
    w = put_varint(w, offset_delta);
    w = put_bytes(w, key, key_length);
    w = put_bytes(w, value, value_length);
    w = put_varint(w, headers);
    cursor again = first;
    for (uint32_t i = 0; i < headers; i++) {
        uint32_t pair, hk_length, hv_length;
        const uint8_t *hk, *hv;
        read_array(&again, &pair);
        read_str(&again, &hk, &hk_length);
        read_bin(&again, &hv, &hv_length);
        w = put_varint(w, hk_length);
        memcpy(w, hk, hk_length);
        w += hk_length;
        w = put_bytes(w, hv, hv_length);
    }
    *out = w;
    return 1;
}

static PyObject *to_kafka_section(PyObject *self, PyObject *args) {
    Py_buffer section;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &section, &count)) return NULL;
    cursor c = {(const uint8_t *)section.buf, (const uint8_t *)section.buf + section.len};
    uint32_t entries;
    size_t total = 0, size;
    PyObject *result = Py_None;
    if (!read_array(&c, &entries) || (Py_ssize_t)entries != count) goto done;
    cursor start = c;
    for (uint32_t i = 0; i < entries; i++) {
        if (!entry(&c, NULL, &size)) goto done;
        total += size;
    }
    if (c.p != c.end || total > PY_SSIZE_T_MAX) goto done;
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (result == NULL) { PyBuffer_Release(&section); return NULL; }
    uint8_t *w = (uint8_t *)PyBytes_AS_STRING(result);
    c = start;
    for (uint32_t i = 0; i < entries; i++) entry(&c, &w, &size);
    PyBuffer_Release(&section);
    return result;
done:
    PyBuffer_Release(&section);
    Py_RETURN_NONE;
}

/* Kafka's v2 records section to Highwater's, for Produce. A Kafka record is: varint length,
 * int8 attributes, varlong timestamp delta, varint offset delta, varint key length (-1: null)
 * and key, the same for the value, varint header count, then per header a varint key length
 * and UTF-8 key, a varint value length (-1: null) and value. Only records this reads exactly
 * as aiokafka's reader does are converted: attributes 0, lengths -1 or in the section, a
 * record's fields filling its length, `count` records filling the section. Anything else
 * returns None and the caller takes the Python path, which converts what aiokafka accepts
 * and names the error otherwise. */

static int read_varlong(cursor *c, int64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) return 0;
        uint8_t b = *c->p++;
        if (shift == 63 && b > 1) return 0; /* past 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1); /* zigzag */
            return 1;
        }
    }
    return 0;
}

/* A length: -1 (null, *start NULL) or that many bytes inside the cursor. */
static int read_kafka_bytes(cursor *c, const uint8_t **start, uint32_t *length) {
    int64_t n;
    if (!read_varlong(c, &n)) return 0;
    if (n == -1) { *start = NULL; *length = 0; return 1; }
    if (n < 0 || n > INT32_MAX || n > c->end - c->p) return 0;
    *start = c->p;
    *length = (uint32_t)n;
    c->p += n;
    return 1;
}

static size_t mp_int_size(int64_t v) {
    if (v >= 0) return v < 128 ? 1 : v < 256 ? 2 : v < 65536 ? 3 : v <= UINT32_MAX ? 5 : 9;
    return v >= -32 ? 1 : v >= -128 ? 2 : v >= -32768 ? 3 : v >= INT32_MIN ? 5 : 9;
}

static uint8_t *put_be(uint8_t *out, uint64_t v, int width) {
    for (int i = width - 1; i >= 0; i--) *out++ = (uint8_t)(v >> (8 * i));
    return out;
}

/* As msgpack's packer writes a Python int: the smallest form, unsigned ones for v >= 0. */
static uint8_t *mp_put_int(uint8_t *out, int64_t v) {
    if (v >= 0) {
        if (v < 128) { *out++ = (uint8_t)v; return out; }
        if (v < 256) { *out++ = 0xcc; return put_be(out, (uint64_t)v, 1); }
        if (v < 65536) { *out++ = 0xcd; return put_be(out, (uint64_t)v, 2); }
        if (v <= UINT32_MAX) { *out++ = 0xce; return put_be(out, (uint64_t)v, 4); }
        *out++ = 0xcf;
        return put_be(out, (uint64_t)v, 8);
    }
    if (v >= -32) { *out++ = (uint8_t)v; return out; }
    if (v >= -128) { *out++ = 0xd0; return put_be(out, (uint64_t)v, 1); }
    if (v >= -32768) { *out++ = 0xd1; return put_be(out, (uint64_t)v, 2); }
    if (v >= INT32_MIN) { *out++ = 0xd2; return put_be(out, (uint64_t)v, 4); }
    *out++ = 0xd3;
    return put_be(out, (uint64_t)v, 8);
}

static size_t mp_array_header_size(uint32_t n) { return n < 16 ? 1 : n < 65536 ? 3 : 5; }

static uint8_t *mp_put_array_header(uint8_t *out, uint32_t n) {
    if (n < 16) { *out++ = (uint8_t)(0x90 | n); return out; }
    if (n < 65536) { *out++ = 0xdc; return put_be(out, n, 2); }
    *out++ = 0xdd;
    return put_be(out, n, 4);
}

/* bin (use_bin_type) or nil. */
static size_t mp_bin_size(const uint8_t *start, uint32_t n) {
    if (start == NULL) return 1;
    return (n < 256 ? 2 : n < 65536 ? 3 : 5) + (size_t)n;
}

static uint8_t *mp_put_bin(uint8_t *out, const uint8_t *start, uint32_t n) {
    if (start == NULL) { *out++ = 0xc0; return out; }
    if (n < 256) { *out++ = 0xc4; out = put_be(out, n, 1); }
    else if (n < 65536) { *out++ = 0xc5; out = put_be(out, n, 2); }
    else { *out++ = 0xc6; out = put_be(out, n, 4); }
    memcpy(out, start, n);
    return out + n;
}

static size_t mp_str_size(uint32_t n) {
    return (n < 32 ? 1 : n < 256 ? 2 : n < 65536 ? 3 : 5) + (size_t)n;
}

static uint8_t *mp_put_str(uint8_t *out, const uint8_t *start, uint32_t n) {
    if (n < 32) *out++ = (uint8_t)(0xa0 | n);
    else if (n < 256) { *out++ = 0xd9; out = put_be(out, n, 1); }
    else if (n < 65536) { *out++ = 0xda; out = put_be(out, n, 2); }
    else { *out++ = 0xdb; out = put_be(out, n, 4); }
    memcpy(out, start, n);
    return out + n;
}

/* UTF-8 as Python's strict decoder takes it (aiokafka decodes header keys so). */
static int valid_utf8(const uint8_t *start, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (start[i] >= 0x80) {
            PyObject *decoded = PyUnicode_DecodeUTF8((const char *)start, n, "strict");
            if (decoded == NULL) { PyErr_Clear(); return 0; }
            Py_DECREF(decoded);
            return 1;
        }
    }
    return 1;
}

/* One Kafka record: its msgpack entry written at *out (if out is not NULL), its size added
 * to *size, its timestamp delta in *ts_delta. */
static int kafka_record(cursor *c, uint8_t **out, size_t *size, int64_t *ts_delta) {
    int64_t length, offset_delta, headers;
    const uint8_t *key, *value;
    uint32_t key_length, value_length;
    if (!read_varlong(c, &length) || length < 0 || length > c->end - c->p) return 0;
    cursor r = {c->p, c->p + length};
    c->p += length;
    if (r.p >= r.end || *r.p++ != 0) return 0; /* attributes: unused, 0 */
    if (!read_varlong(&r, ts_delta) || !read_varlong(&r, &offset_delta)) return 0;
    if (offset_delta < INT32_MIN || offset_delta > INT32_MAX) return 0;
    if (!read_kafka_bytes(&r, &key, &key_length)) return 0;
    if (!read_kafka_bytes(&r, &value, &value_length)) return 0;
    if (!read_varlong(&r, &headers) || headers < 0 || headers > r.end - r.p) return 0;
    cursor first = r;
    size_t entry_size = 1 + mp_int_size(*ts_delta) + mp_int_size(offset_delta)
                        + mp_bin_size(key, key_length) + mp_bin_size(value, value_length)
                        + mp_array_header_size((uint32_t)headers);
    for (int64_t i = 0; i < headers; i++) {
        const uint8_t *hk, *hv;
        uint32_t hk_length, hv_length;
        if (!read_kafka_bytes(&r, &hk, &hk_length) || hk == NULL) return 0;
        if (!valid_utf8(hk, hk_length)) return 0;
        if (!read_kafka_bytes(&r, &hv, &hv_length)) return 0;
        entry_size += 1 + mp_str_size(hk_length) + mp_bin_size(hv, hv_length);
    }
    if (r.p != r.end) return 0; /* the fields fill the record's length exactly */
    *size += entry_size;
    if (out == NULL) return 1;
    uint8_t *w = *out;
    *w++ = 0x95; /* [ts_delta, offset_delta, key, value, headers] */
    w = mp_put_int(w, *ts_delta);
    w = mp_put_int(w, offset_delta);
    w = mp_put_bin(w, key, key_length);
    w = mp_put_bin(w, value, value_length);
    w = mp_put_array_header(w, (uint32_t)headers);
    for (int64_t i = 0; i < headers; i++) {
        const uint8_t *hk, *hv;
        uint32_t hk_length, hv_length;
        read_kafka_bytes(&first, &hk, &hk_length);
        read_kafka_bytes(&first, &hv, &hv_length);
        *w++ = 0x92;
        w = mp_put_str(w, hk, hk_length);
        w = mp_put_bin(w, hv, hv_length);
    }
    *out = w;
    return 1;
}

static PyObject *from_kafka_section(PyObject *self, PyObject *args) {
    Py_buffer section;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &section, &count)) return NULL;
    cursor c = {(const uint8_t *)section.buf, (const uint8_t *)section.buf + section.len};
    int64_t ts_delta, max_ts_delta = INT64_MIN;
    size_t total = 0;
    if (count <= 0 || count > UINT32_MAX) goto done;
    total = mp_array_header_size((uint32_t)count);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!kafka_record(&c, NULL, &total, &ts_delta)) goto done;
        if (ts_delta > max_ts_delta) max_ts_delta = ts_delta;
    }
    if (c.p != c.end || total > PY_SSIZE_T_MAX) goto done;
    PyObject *packed = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (packed == NULL) { PyBuffer_Release(&section); return NULL; }
    uint8_t *w = mp_put_array_header((uint8_t *)PyBytes_AS_STRING(packed), (uint32_t)count);
    size_t unused = 0;
    c.p = (const uint8_t *)section.buf;
    for (Py_ssize_t i = 0; i < count; i++) kafka_record(&c, &w, &unused, &ts_delta);
    PyBuffer_Release(&section);
    return Py_BuildValue("(NL)", packed, (long long)max_ts_delta);
done:
    PyBuffer_Release(&section);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"to_kafka_section", to_kafka_section, METH_VARARGS,
     "to_kafka_section(section, count) -> bytes | None: a plain msgpack records section as "
     "Kafka's v2 records section; None for a section of another shape."},
    {"from_kafka_section", from_kafka_section, METH_VARARGS,
     "from_kafka_section(section, count) -> (bytes, int) | None: Kafka's uncompressed v2 "
     "records section of count records as a msgpack records section, with the largest "
     "timestamp delta; None where aiokafka's reader is the judge."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_transcode", NULL, -1, methods};

PyMODINIT_FUNC PyInit__transcode(void) { return PyModule_Create(&module); }
