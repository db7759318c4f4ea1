/* The rich columns of pulsar-messages rows, staged in C as Arrow buffers (included by
 * _pulsar_speedups.c after utf8_ok, grow and last_i32; used by split_rows, single_row,
 * split_batch_into and decode_entries_into). Ten bytearrays, native byte order:
 *   0 ordering_key offsets (int32), 1 its bytes, 2 its validity (int8),
 *   3 properties: the map's offsets (int32, into its entries), 4 key offsets (int32),
 *   5 key bytes (UTF-8), 6 value offsets (int32), 7 value bytes (UTF-8),
 *   8 event_time (int64 microseconds; 0 when NULL), 9 its validity (int8).
 * Each of the three columns is lazy: its bytearrays stay empty while no staged row has one (an
 * ordering key, at least one property, an event time that is not 0), so a batch without them
 * costs nothing; the first row that has one fills in the rows staged before it first (NULL, or
 * an empty map; the offsets from 0). An event time past Spark's range (MAX_SPARK_MS, as
 * _timestamps in message_columns.py) is NULL, as one past INT64_MAX. Properties keep their
 * order, duplicate keys included. formats/pulsar/rich_columns.py is the Python twin (the same
 * bytes), message_columns.py turns the bytearrays into Arrow arrays.
 *
 * A split gathers an entry's rows in a Rich scratch (positions into the entry, no Python
 * object): rich_begin, then rich_props for every message (the properties are checked, those of
 * compacted messages too) and rich_row for each row kept. Once the whole entry is taken,
 * rich_fits (the int32 offsets) then rich_write append it: nothing is appended for an entry
 * declined half way. */
#ifndef PULSAR_RICH_H
#define PULSAR_RICH_H

#define RICH_COLS 10

typedef struct { Py_ssize_t key_at, key_len, val_at, val_len; } KvSpan;
typedef struct { uint64_t event; Py_ssize_t ord_at, ord_len, nprops; } RichRow;
typedef struct {
    RichRow *rows;
    KvSpan *kv;
    Py_ssize_t rows_cap, kv_cap, n, nkv, ord_bytes, key_bytes, val_bytes;
    int any_ord, any_prop, any_event;
} Rich;

static void rich_free(Rich *r) {
    PyMem_Free(r->rows);
    PyMem_Free(r->kv);
    r->rows = NULL; r->kv = NULL; r->rows_cap = r->kv_cap = 0;
}

/* an empty scratch with room for ``count`` rows; 0, or -1 with MemoryError */
static int rich_begin(Rich *r, Py_ssize_t count) {
    r->n = r->nkv = r->ord_bytes = r->key_bytes = r->val_bytes = 0;
    r->any_ord = r->any_prop = r->any_event = 0;
    if (count > r->rows_cap) {
        Py_ssize_t cap = count > 2 * r->rows_cap ? count : 2 * r->rows_cap;
        RichRow *grown = PyMem_Realloc(r->rows, sizeof(RichRow) * (size_t)cap);
        if (grown == NULL) { PyErr_NoMemory(); return -1; }
        r->rows = grown; r->rows_cap = cap;
    }
    return 0;
}

/* a KeyValue in p[pos, end) -> *s; 1 when it is accepted as key_value(strict) accepts it (one
 * key and one value, both valid UTF-8), else 0 */
static int kv_span(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, int strict, KvSpan *s) {
    Cur c = {p, pos, end};
    Py_ssize_t at[3] = {-1, -1, -1}, len[3] = {0, 0, 0};
    while (c.pos < end) {
        uint64_t tag, n;
        if (rd_varint(&c, end, &tag)) return 0;
        int wire = (int)(tag & 7);
        uint64_t field = tag >> 3;
        if (wire == 2 && (field == 1 || field == 2)) {
            if (at[field] >= 0) return 0;
            if (rd_varint(&c, end, &n) || n > (uint64_t)(end - c.pos)) return 0;
            at[field] = c.pos; len[field] = (Py_ssize_t)n;
            c.pos += (Py_ssize_t)n;
        } else if ((strict && field <= 2) || skip_field(&c, end, wire)) return 0;
    }
    if (at[1] < 0 || at[2] < 0 || !utf8_ok(p + at[1], len[1]) || !utf8_ok(p + at[2], len[2]))
        return 0;
    s->key_at = at[1]; s->key_len = len[1]; s->val_at = at[2]; s->val_len = len[2];
    return 1;
}

/* the n KeyValues at[i], len[i] checked into the scratch after its rows' (not kept until
 * rich_row takes them); 0, 1 (one is bad) or 2 (MemoryError) */
static int rich_props(Rich *r, const unsigned char *p, const Py_ssize_t *at, const Py_ssize_t *len,
                      Py_ssize_t n, int strict) {
    if (r->nkv + n > r->kv_cap) {
        Py_ssize_t cap = r->nkv + n > 2 * r->kv_cap ? r->nkv + n : 2 * r->kv_cap;
        KvSpan *grown = PyMem_Realloc(r->kv, sizeof(KvSpan) * (size_t)cap);
        if (grown == NULL) { PyErr_NoMemory(); return 2; }
        r->kv = grown; r->kv_cap = cap;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!kv_span(p, at[i], at[i] + len[i], strict, &r->kv[r->nkv + i])) return 1;
    }
    return 0;
}

/* one row kept: its event time (0: unset), ordering key (ord_at < 0: unset) and the nprops
 * properties rich_props checked last (rich_begin made room for the row) */
static void rich_row(Rich *r, uint64_t event, Py_ssize_t ord_at, Py_ssize_t ord_len,
                     Py_ssize_t nprops) {
    RichRow *row = &r->rows[r->n++];
    row->event = event; row->ord_at = ord_at; row->ord_len = ord_len; row->nprops = nprops;
    r->any_event |= event != 0;
    if (ord_at >= 0) { r->any_ord = 1; r->ord_bytes += ord_len; }
    if (nprops) {
        r->any_prop = 1;
        for (Py_ssize_t i = r->nkv; i < r->nkv + nprops; i++) {
            r->key_bytes += r->kv[i].key_len;
            r->val_bytes += r->kv[i].val_len;
        }
        r->nkv += nprops;
    }
}

/* the last int32 of an offsets bytearray, 0 when the column has not started */
static int64_t last_or_0(PyObject *ba) {
    return PyByteArray_GET_SIZE(ba) >= 4 ? (int64_t)last_i32(ba) : 0;
}

/* whether the scratch's rows still fit the int32 offsets of rb (the 10 rich bytearrays) */
static int rich_fits(const Rich *r, PyObject **rb) {
    return last_or_0(rb[0]) + r->ord_bytes <= INT32_MAX &&
           last_or_0(rb[3]) + r->nkv <= INT32_MAX &&
           last_or_0(rb[4]) + r->key_bytes <= INT32_MAX &&
           last_or_0(rb[6]) + r->val_bytes <= INT32_MAX;
}

/* room in ba for ``fill`` rows of ``width`` zeros when the column starts here, then for
 * ``n`` rows; *at: where the n rows go; cap: grow_to's. 0, or -1 with MemoryError */
static int rich_grow(PyObject *ba, Py_ssize_t width, Py_ssize_t fill, int starts, Py_ssize_t n,
                     char **at, Py_ssize_t cap) {
    Py_ssize_t zeros = starts ? width * fill : 0;
    char *w = grow_to(ba, zeros + width * n, cap);
    if (w == NULL) return -1;
    memset(w, 0, (size_t)zeros);
    *at = w + zeros;
    return 0;
}

/* an int32 offsets bytearray: the starting 0 and ``before`` more (rows without a value) when
 * it starts, then room for ``n``; the running offset in *off; NULL with MemoryError */
static char *offsets_grow(PyObject *ba, int starts, Py_ssize_t before, Py_ssize_t n, int32_t *off,
                          Py_ssize_t cap) {
    char *at;
    *off = starts ? 0 : last_i32(ba);
    return rich_grow(ba, 4, before + 1, starts, n, &at, cap) ? NULL : at;
}

/* append the scratch's rows to rb (the 10 rich bytearrays; rich_fits checked), ``before``
 * rows staged already, the buffers grown as write_rows grows the others (caps); 0, or 2 with
 * MemoryError */
static int rich_write(const Rich *r, PyObject **rb, const unsigned char *p, Py_ssize_t before,
                      Caps caps) {
    Py_ssize_t n = r->n;
    int starts;
    char *o, *d, *v;
    int32_t off;
    /* ordering_key */
    starts = PyByteArray_GET_SIZE(rb[0]) == 0;
    if (!starts || r->any_ord) {
        if ((o = offsets_grow(rb[0], starts, before, n, &off, rows_cap(caps, 4, 1))) == NULL ||
            (d = grow_to(rb[1], r->ord_bytes, bytes_cap(caps, rb[1], before, n, r->ord_bytes))) == NULL ||
            rich_grow(rb[2], 1, before, starts, n, &v, rows_cap(caps, 1, 0)))
            return 2;
        for (Py_ssize_t i = 0; i < n; i++) {
            const RichRow *row = &r->rows[i];
            if (row->ord_at >= 0 && row->ord_len) {
                memcpy(d, p + row->ord_at, (size_t)row->ord_len);
                d += row->ord_len; off += (int32_t)row->ord_len;
            }
            memcpy(o + 4 * i, &off, 4);
            v[i] = row->ord_at >= 0;
        }
    }
    /* properties */
    starts = PyByteArray_GET_SIZE(rb[3]) == 0;
    if (!starts || r->any_prop) {
        int32_t koff, voff;
        char *ko, *kd, *vo, *vd;
        if ((o = offsets_grow(rb[3], starts, before, n, &off, rows_cap(caps, 4, 1))) == NULL ||
            (ko = offsets_grow(rb[4], starts, 0, r->nkv, &koff,
                               bytes_cap(caps, rb[4], before, n, 4 * r->nkv))) == NULL ||
            (kd = grow_to(rb[5], r->key_bytes, bytes_cap(caps, rb[5], before, n, r->key_bytes))) == NULL ||
            (vo = offsets_grow(rb[6], starts, 0, r->nkv, &voff,
                               bytes_cap(caps, rb[6], before, n, 4 * r->nkv))) == NULL ||
            (vd = grow_to(rb[7], r->val_bytes, bytes_cap(caps, rb[7], before, n, r->val_bytes))) == NULL)
            return 2;
        for (Py_ssize_t i = 0; i < n; i++) {
            off += (int32_t)r->rows[i].nprops;
            memcpy(o + 4 * i, &off, 4);
        }
        for (Py_ssize_t i = 0; i < r->nkv; i++) {
            const KvSpan *s = &r->kv[i];
            memcpy(kd, p + s->key_at, (size_t)s->key_len);
            kd += s->key_len; koff += (int32_t)s->key_len;
            memcpy(ko + 4 * i, &koff, 4);
            memcpy(vd, p + s->val_at, (size_t)s->val_len);
            vd += s->val_len; voff += (int32_t)s->val_len;
            memcpy(vo + 4 * i, &voff, 4);
        }
    }
    /* event_time */
    starts = PyByteArray_GET_SIZE(rb[9]) == 0;
    if (!starts || r->any_event) {
        if (rich_grow(rb[8], 8, before, starts, n, &d, rows_cap(caps, 8, 0)) ||
            rich_grow(rb[9], 1, before, starts, n, &v, rows_cap(caps, 1, 0)))
            return 2;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t ms = r->rows[i].event;
            int ok = ms != 0 && ms <= MAX_SPARK_MS;
            int64_t us = ok ? (int64_t)ms * 1000 : 0;
            memcpy(d + 8 * i, &us, 8);
            v[i] = (char)ok;
        }
    }
    return 0;
}

/* the 10 rich bytearrays of cols[first, first + 10): their offsets empty (not started) or
 * started with the starting 0; -1 with a TypeError otherwise */
static int check_rich(PyObject *cols, Py_ssize_t first, const char *who) {
    for (Py_ssize_t i = first; i < first + RICH_COLS; i++) {
        PyObject *b = PyTuple_GET_ITEM(cols, i);
        if (!PyByteArray_CheckExact(b)) {
            PyErr_Format(PyExc_TypeError, "%s wants bytearrays", who);
            return -1;
        }
    }
    PyObject **rb = &PyTuple_GET_ITEM(cols, first);
    Py_ssize_t ord = PyByteArray_GET_SIZE(rb[0]), map = PyByteArray_GET_SIZE(rb[3]);
    if ((ord != 0 && ord < 4) || (map != 0 && (map < 4 || PyByteArray_GET_SIZE(rb[4]) < 4 ||
                                               PyByteArray_GET_SIZE(rb[6]) < 4))) {
        PyErr_Format(PyExc_TypeError, "%s: rich offsets started without their 0", who);
        return -1;
    }
    return 0;
}

#endif
