/* A Highwater records section (msgpack) straight to Kafka's v2 records section, for the Kafka
 * listener's Fetch (protocol/kafka/records.py has the Python path, through aiokafka's codec,
 * and is the reference: a differential test holds the two to the same bytes).
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

static PyMethodDef methods[] = {
    {"to_kafka_section", to_kafka_section, METH_VARARGS,
     "to_kafka_section(section, count) -> bytes | None: a plain msgpack records section as "
     "Kafka's v2 records section; None for a section of another shape."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_transcode", NULL, -1, methods};

PyMODINIT_FUNC PyInit__transcode(void) { return PyModule_Create(&module); }
