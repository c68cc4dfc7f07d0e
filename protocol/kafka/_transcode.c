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

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

static int read_be(cursor *c, int width, uint64_t *out) {
    if (c->end - c->p < width) return 0;
    uint64_t v = 0;
    for (int i = 0; i < width; i++) v = (v << 8) | c->p[i];
    c->p += width;
    *out = v;
    return 1;
}

static int read_int(cursor *c, int64_t *out) {
    if (c->p >= c->end) return 0;
    uint8_t tag = *c->p++;
    uint64_t u;
    if (tag <= 0x7f) { *out = tag; return 1; }
    if (tag >= 0xe0) { *out = (int8_t)tag; return 1; }
    switch (tag) {
    case 0xcc: if (!read_be(c, 1, &u)) return 0; *out = (int64_t)u; return 1;
    case 0xcd: if (!read_be(c, 2, &u)) return 0; *out = (int64_t)u; return 1;
    case 0xce: if (!read_be(c, 4, &u)) return 0; *out = (int64_t)u; return 1;
    case 0xcf: if (!read_be(c, 8, &u) || u > INT64_MAX) return 0; *out = (int64_t)u; return 1;
    case 0xd0: if (!read_be(c, 1, &u)) return 0; *out = (int8_t)u; return 1;
    case 0xd1: if (!read_be(c, 2, &u)) return 0; *out = (int16_t)u; return 1;
    case 0xd2: if (!read_be(c, 4, &u)) return 0; *out = (int32_t)u; return 1;
    case 0xd3: if (!read_be(c, 8, &u)) return 0; *out = (int64_t)u; return 1;
    default: return 0;
    }
}

static int read_array(cursor *c, uint32_t *count) {
    if (c->p >= c->end) return 0;
    uint8_t tag = *c->p++;
    uint64_t n;
    if ((tag & 0xf0) == 0x90) { *count = tag & 0x0f; return 1; }
    if (tag == 0xdc) { if (!read_be(c, 2, &n)) return 0; *count = (uint32_t)n; return 1; }
    if (tag == 0xdd) { if (!read_be(c, 4, &n)) return 0; *count = (uint32_t)n; return 1; }
    return 0;
}

/* bin or nil (want_str: str or nil instead); *start is NULL for nil. */
static int read_bytes(cursor *c, int want_str, const uint8_t **start, uint32_t *length) {
    if (c->p >= c->end) return 0;
    uint8_t tag = *c->p++;
    uint64_t n;
    if (tag == 0xc0) { *start = NULL; *length = 0; return !want_str; }
    if (want_str && (tag & 0xe0) == 0xa0) n = tag & 0x1f;
    else if (want_str && tag == 0xd9) { if (!read_be(c, 1, &n)) return 0; }
    else if (want_str && tag == 0xda) { if (!read_be(c, 2, &n)) return 0; }
    else if (want_str && tag == 0xdb) { if (!read_be(c, 4, &n)) return 0; }
    else if (!want_str && tag == 0xc4) { if (!read_be(c, 1, &n)) return 0; }
    else if (!want_str && tag == 0xc5) { if (!read_be(c, 2, &n)) return 0; }
    else if (!want_str && tag == 0xc6) { if (!read_be(c, 4, &n)) return 0; }
    else return 0;
    if ((uint64_t)(c->end - c->p) < n || n > INT32_MAX) return 0;
    *start = c->p;
    *length = (uint32_t)n;
    c->p += n;
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
    if (!read_bytes(c, 0, &key, &key_length) || !read_bytes(c, 0, &value, &value_length)) return 0;
    if (!read_array(c, &headers)) return 0;
    cursor first = *c;
    size_t body = 1 + varint_size(ts_delta) + varint_size(offset_delta)
                  + bytes_size(key, key_length) + bytes_size(value, value_length)
                  + varint_size(headers);
    for (uint32_t i = 0; i < headers; i++) {
        uint32_t pair, hk_length, hv_length;
        const uint8_t *hk, *hv;
        if (!read_array(c, &pair) || pair != 2) return 0;
        if (!read_bytes(c, 1, &hk, &hk_length) || !read_bytes(c, 0, &hv, &hv_length)) return 0;
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
        read_bytes(&again, 1, &hk, &hk_length);
        read_bytes(&again, 0, &hv, &hv_length);
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
