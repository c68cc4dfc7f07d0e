/* A records section of the usual shape straight to column buffers, for the Spark source.
 *
 * columns.py does the same in Python (_plain_columns); this is its compiled twin, used when
 * it was built. It takes only what the usual producer writes: an array of `count` entries,
 * each [timestamp_delta, offset_delta == its index, key bin|nil, value bin|nil, []]. Anything
 * else returns None and the caller takes the checked Python path, which names the error.
 * Every length is checked against the section's end before it is used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../../protocol/_msgpack_read.h"

/* The entries lo..hi-1 of a section of `count` entries into the buffers; 0 when the section
 * is not of the usual shape. */
static int scan(const Py_buffer *view, Py_ssize_t count, Py_ssize_t lo, Py_ssize_t hi,
                int64_t *ts_out, int32_t *key_len_out, char *key_out, Py_ssize_t *key_used,
                int32_t *value_len_out, char *value_out, Py_ssize_t *value_used) {
    cursor c = {(const uint8_t *)view->buf, (const uint8_t *)view->buf + view->len};
    uint64_t n;
    if (!read_array_header(&c, &n) || n != (uint64_t)count) return 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t ts_delta, offset_delta;
        const uint8_t *key, *value;
        uint32_t key_length, value_length;
        if (c.p >= c.end || *c.p++ != 0x95) return 0;
        if (!read_int(&c, &ts_delta) || !read_int(&c, &offset_delta) || offset_delta != i)
            return 0;
        if (!read_bin(&c, &key, &key_length) || !read_bin(&c, &value, &value_length)) return 0;
        if (c.p >= c.end || *c.p++ != 0x90) return 0; /* no headers */
        if (i < lo || i >= hi) continue;
        Py_ssize_t j = i - lo;
        ts_out[j] = ts_delta;
        key_len_out[j] = key ? (int32_t)key_length : -1;
        value_len_out[j] = value ? (int32_t)value_length : -1;
        if (key) {
            memcpy(key_out + *key_used, key, key_length);
            *key_used += key_length;
        }
        if (value) {
            memcpy(value_out + *value_used, value, value_length);
            *value_used += value_length;
        }
    }
    return c.p == c.end;
}

/* decode_section(section, count, lo, hi) -> (timestamp deltas int64[k], key lengths int32[k],
 * key bytes, value lengths int32[k], value bytes) for the entries lo..hi-1, k = hi - lo, a
 * length of -1 meaning nil; or None when the section is not of the usual shape. */
static PyObject *decode_section(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count, lo, hi;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &count, &lo, &hi)) return NULL;
    PyObject *result = NULL, *ts = NULL, *key_lengths = NULL, *keys = NULL;
    PyObject *value_lengths = NULL, *values = NULL;
    Py_ssize_t size = view.len;
    /* Every entry takes at least 6 bytes, so a count the section cannot hold is refused before
     * anything is sized from it. */
    if (count < 0 || lo < 0 || hi < lo || hi > count || count > size / 6) goto not_usual;
    Py_ssize_t k = hi - lo;
    ts = PyBytes_FromStringAndSize(NULL, k * 8);
    key_lengths = PyBytes_FromStringAndSize(NULL, k * 4);
    value_lengths = PyBytes_FromStringAndSize(NULL, k * 4);
    keys = PyBytes_FromStringAndSize(NULL, size);
    values = PyBytes_FromStringAndSize(NULL, size);
    if (!ts || !key_lengths || !value_lengths || !keys || !values) goto error;
    int64_t *ts_out = (int64_t *)PyBytes_AS_STRING(ts);
    int32_t *key_len_out = (int32_t *)PyBytes_AS_STRING(key_lengths);
    int32_t *value_len_out = (int32_t *)PyBytes_AS_STRING(value_lengths);
    char *key_out = PyBytes_AS_STRING(keys), *value_out = PyBytes_AS_STRING(values);
    Py_ssize_t key_used = 0, value_used = 0;

    /* The GIL is kept: a section is a few microseconds' work, less than a switch costs. */
    if (!scan(&view, count, lo, hi, ts_out, key_len_out, key_out, &key_used, value_len_out,
              value_out, &value_used))
        goto not_usual;
    if (_PyBytes_Resize(&keys, key_used) < 0 || _PyBytes_Resize(&values, value_used) < 0)
        goto error;
    result = PyTuple_Pack(5, ts, key_lengths, keys, value_lengths, values);
    goto error; /* releases the references PyTuple_Pack took its own of */

not_usual:
    result = Py_NewRef(Py_None);
error:
    Py_XDECREF(ts);
    Py_XDECREF(key_lengths);
    Py_XDECREF(keys);
    Py_XDECREF(value_lengths);
    Py_XDECREF(values);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_section", decode_section, METH_VARARGS,
     "decode_section(section, count, lo, hi): a usual records section's columns, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "client.spark._sections", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__sections(void) { return PyModule_Create(&module); }
