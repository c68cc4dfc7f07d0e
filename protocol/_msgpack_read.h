/* Bounded readers of the msgpack a records section is made of, shared by the compiled
 * section decoders (client/spark/_sections.c, protocol/kafka/_transcode.c). Each returns 0
 * when the bytes are not what it reads or run past the end, and never reads past `end`. */
#ifndef HIGHWATER_MSGPACK_READ_H
#define HIGHWATER_MSGPACK_READ_H

#include <stdint.h>

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

static inline int read_be(cursor *c, int width, uint64_t *out) {
    if (c->end - c->p < width) return 0;
    uint64_t v = 0;
    for (int i = 0; i < width; i++) v = (v << 8) | c->p[i];
    c->p += width;
    *out = v;
    return 1;
}

/* A msgpack integer that fits int64. */
static inline int read_int(cursor *c, int64_t *out) {
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

static inline int read_array_header(cursor *c, uint64_t *n) {
    if (c->p >= c->end) return 0;
    uint8_t tag = *c->p++;
    if ((tag & 0xf0) == 0x90) { *n = tag & 0x0f; return 1; }
    if (tag == 0xdc) return read_be(c, 2, n);
    if (tag == 0xdd) return read_be(c, 4, n);
    return 0;
}

static inline int take(cursor *c, uint64_t n, const uint8_t **start, uint32_t *length) {
    if ((uint64_t)(c->end - c->p) < n || n > INT32_MAX) return 0;
    *start = c->p;
    *length = (uint32_t)n;
    c->p += n;
    return 1;
}

/* bin or nil: *start is NULL for nil. */
static inline int read_bin(cursor *c, const uint8_t **start, uint32_t *length) {
    if (c->p >= c->end) return 0;
    uint8_t tag = *c->p++;
    uint64_t n;
    if (tag == 0xc0) { *start = NULL; *length = 0; return 1; }
    if (tag == 0xc4) { if (!read_be(c, 1, &n)) return 0; }
    else if (tag == 0xc5) { if (!read_be(c, 2, &n)) return 0; }
    else if (tag == 0xc6) { if (!read_be(c, 4, &n)) return 0; }
    else return 0;
    return take(c, n, start, length);
}

/* str (never nil). */
static inline int read_str(cursor *c, const uint8_t **start, uint32_t *length) {
    if (c->p >= c->end) return 0;
    uint8_t tag = *c->p++;
    uint64_t n;
    if ((tag & 0xe0) == 0xa0) n = tag & 0x1f;
    else if (tag == 0xd9) { if (!read_be(c, 1, &n)) return 0; }
    else if (tag == 0xda) { if (!read_be(c, 2, &n)) return 0; }
    else if (tag == 0xdb) { if (!read_be(c, 4, &n)) return 0; }
    else return 0;
    return take(c, n, start, length);
}

#endif
