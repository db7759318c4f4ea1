/* C twins of formats/pulsar/batch.py's split_columns and formats/pulsar/metadata.py's
 * decode_message_metadata. Any input they do not accept (malformed, or a field layout they do
 * not handle) returns None: the caller then runs the pure-Python twin, which raises the
 * precise typed error (or handles the rare layout). No exception is raised for bad data.
 *
 * split_batch_columns(data: bytes-like, count: int) -> None | tuple of 9 lists:
 *   batch_index (int), key (str|None), ordering_key (bytes|None), properties (tuple of
 *   (str, str) tuples), event_time (int|None; 0 = None), sequence_id (int|None),
 *   is_null (bool), value (bytes; b"" when null), key_b64 (bool)
 * compacted_out messages are skipped (their index still counts). Strings that repeat inside a
 * batch (keys, property names and values) are decoded once and shared (str is immutable).
 *
 * split_batch_into(data, count, base_seq, cols): the same split appended straight into a
 *   worker's column bytearrays (no Python object per message, properties, ordering keys and
 *   event times included: _pulsar_rich.h); see its comment below.
 *
 * message_metadata_values(data: bytes-like) -> None | tuple of the 28 MessageMetadata fields
 *   in the dataclass's order (absent: None, or () for the repeated ones; event_time 0: None).
 *   None when a required field is missing, a field is malformed, or encryption_keys is set.
 *
 * decode_entries_into (a run of a packed block's entries checked and split into a worker's
 *   columns, one call for many entries), message_ids_into and crc32c: _pulsar_block.h, with
 *   the CRC32C of _crc32c.h (shared with _speedups.c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_crc32c.h"

typedef struct { const unsigned char *p; Py_ssize_t pos, end; } Cur;

static int rd_varint(Cur *c, Py_ssize_t end, uint64_t *out) {
    if (c->pos < end && c->p[c->pos] < 0x80) { *out = c->p[c->pos++]; return 0; }
    uint64_t v = 0; int shift = 0;
    while (c->pos < end) {
        unsigned char b = c->p[c->pos++];
        if (shift == 63 && (b & 0x7E)) return -1;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) { *out = v; return 0; }
        shift += 7;
        if (shift > 63) return -1;
    }
    return -1;
}

static int skip_field(Cur *c, Py_ssize_t end, int wire) {
    uint64_t v;
    if (wire == 0) return rd_varint(c, end, &v);
    if (wire == 2) {
        if (rd_varint(c, end, &v) || v > (uint64_t)(end - c->pos)) return -1;
        c->pos += (Py_ssize_t)v; return 0;
    }
    if (wire == 1 || wire == 5) {
        Py_ssize_t w = wire == 1 ? 8 : 4;
        if (end - c->pos < w) return -1;
        c->pos += w; return 0;
    }
    return -1;
}

/* --- a small direct-mapped cache of the strings already decoded from one buffer ------------
 * (CPython already shares "" and one-character strings; longer ones repeat in real batches:
 * keys, property names) */
#define CACHE_SIZE 64
#define CACHE_MAX_LEN 64
typedef struct { Py_ssize_t at[CACHE_SIZE], len[CACHE_SIZE]; PyObject *obj[CACHE_SIZE]; } StrCache;

static void cache_clear(StrCache *sc) {
    for (int i = 0; i < CACHE_SIZE; i++) { Py_CLEAR(sc->obj[i]); }
}

/* a new reference to the UTF-8 text at p[at:at+len]; NULL with no error set if not UTF-8 */
static PyObject *text(StrCache *sc, const unsigned char *p, Py_ssize_t at, Py_ssize_t len) {
    int slot = -1;
    if (sc != NULL && len >= 2 && len <= CACHE_MAX_LEN) {
        slot = (int)(((size_t)len * 31u + p[at] * 7u + p[at + len - 1] + p[at + len / 2] * 3u) % CACHE_SIZE);
        PyObject *hit = sc->obj[slot];
        if (hit != NULL && sc->len[slot] == len && memcmp(p + sc->at[slot], p + at, (size_t)len) == 0) {
            return Py_NewRef(hit);
        }
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p + at, len, NULL);
    if (s == NULL) { PyErr_Clear(); return NULL; }
    if (slot >= 0) {
        Py_XSETREF(sc->obj[slot], Py_NewRef(s));
        sc->at[slot] = at; sc->len[slot] = len;
    }
    return s;
}

/* a KeyValue message in [pos, end) -> new (key, value) tuple, NULL (no error set) if bad or
 * unusual (a repeated key or value). ``strict``: a key or value with another wire type, or a
 * field number 0, is bad (MessageMetadata's decoder); otherwise they are skipped (the batch's). */
static PyObject *key_value(StrCache *sc, const unsigned char *p, Py_ssize_t pos, Py_ssize_t end,
                           int strict) {
    Cur c = {p, pos, end};
    Py_ssize_t at[3] = {-1, -1, -1}, len[3] = {0, 0, 0};
    while (c.pos < end) {
        uint64_t tag, n;
        if (rd_varint(&c, end, &tag)) return NULL;
        int wire = (int)(tag & 7);
        uint64_t field = tag >> 3;
        if (wire == 2 && (field == 1 || field == 2)) {
            if (at[field] >= 0) return NULL;
            if (rd_varint(&c, end, &n) || n > (uint64_t)(end - c.pos)) return NULL;
            at[field] = c.pos; len[field] = (Py_ssize_t)n;
            c.pos += (Py_ssize_t)n;
        } else if (strict && (field <= 2)) return NULL;
        else if (skip_field(&c, end, wire)) return NULL;
    }
    if (at[1] < 0 || at[2] < 0) return NULL;
    PyObject *k = text(sc, p, at[1], len[1]);
    if (k == NULL) return NULL;
    PyObject *v = text(sc, p, at[2], len[2]);
    if (v == NULL) { Py_DECREF(k); return NULL; }
    PyObject *t = PyTuple_New(2);
    if (t == NULL) { Py_DECREF(k); Py_DECREF(v); return NULL; }
    PyTuple_SET_ITEM(t, 0, k);
    PyTuple_SET_ITEM(t, 1, v);
    return t;
}

/* the KeyValues at[0..n) (each at[i], len[i]) -> a new tuple; NULL: bad (error set if 2) */
static PyObject *kv_tuple(StrCache *sc, const unsigned char *p, const Py_ssize_t *at,
                          const Py_ssize_t *len, Py_ssize_t n, int strict, int *failed) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL) { *failed = 2; return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kv = key_value(sc, p, at[i], at[i] + len[i], strict);
        if (kv == NULL) { Py_DECREF(t); *failed = PyErr_Occurred() ? 2 : 1; return NULL; }
        PyTuple_SET_ITEM(t, i, kv);
    }
    return t;
}

#define MAX_PROPS 32  /* more properties on one message: the Python twin splits the batch */

/* One message of a batch at c->pos: int32 size, SingleMessageMetadata, payload; c->pos moves
   past it. 0, or 1 when malformed (the caller declines; the Python twin raises). */
typedef struct {
    Py_ssize_t key_at, key_len, ord_at, ord_len, value_at, nprops;
    Py_ssize_t prop_at[MAX_PROPS], prop_len[MAX_PROPS];
    int64_t payload_size;
    uint64_t event, seq;
    int has_seq, compacted, is_null, b64, null_key;
} Single;

static int parse_single(Cur *c, Py_ssize_t end, Single *s) {
    const unsigned char *p = c->p;
    if (end - c->pos < 4) return 1;
    int32_t size = (int32_t)(((uint32_t)p[c->pos] << 24) | ((uint32_t)p[c->pos + 1] << 16) |
                             ((uint32_t)p[c->pos + 2] << 8) | (uint32_t)p[c->pos + 3]);
    c->pos += 4;
    if (size < 0 || size > end - c->pos) return 1;
    Py_ssize_t stop = c->pos + size;
    s->key_at = -1; s->key_len = 0; s->ord_at = -1; s->ord_len = 0; s->nprops = 0;
    s->payload_size = -1; s->event = 0; s->seq = 0;
    s->has_seq = 0; s->compacted = 0; s->is_null = 0; s->b64 = 0; s->null_key = 0;
    while (c->pos < stop) {
        uint64_t tag, v;
        if (rd_varint(c, stop, &tag)) return 1;
        int wire = (int)(tag & 7);
        uint64_t field = tag >> 3;
        if (field == 0) return 1;
        if (field >= 3 && field <= 10 && field != 7) {
            if (wire != 0 || rd_varint(c, stop, &v)) return 1;
            switch (field) {
            case 3: s->payload_size = v < ((uint64_t)1 << 31) ? (int64_t)v : -1; break;
            case 4: s->compacted = v != 0; break;
            case 5: s->event = v; break;
            case 6: s->b64 = v != 0; break;
            case 8: s->seq = v; s->has_seq = 1; break;
            case 9: s->is_null = v != 0; break;
            case 10: s->null_key = v != 0; break;
            }
        } else if (field == 1 || field == 2 || field == 7) {
            if (wire != 2 || rd_varint(c, stop, &v) || v > (uint64_t)(stop - c->pos)) return 1;
            if (field == 1) {
                if (s->nprops == MAX_PROPS) return 1;
                s->prop_at[s->nprops] = c->pos; s->prop_len[s->nprops] = (Py_ssize_t)v; s->nprops++;
            } else if (field == 2) {
                if (s->key_at >= 0) return 1;  /* repeated: the Python twin refuses it too */
                s->key_at = c->pos; s->key_len = (Py_ssize_t)v;
            } else { s->ord_at = c->pos; s->ord_len = (Py_ssize_t)v; }
            c->pos += (Py_ssize_t)v;
        } else if (skip_field(c, stop, wire)) return 1;
    }
    if (s->payload_size < 0 || s->payload_size > end - c->pos) return 1;
    s->value_at = c->pos;
    c->pos += (Py_ssize_t)s->payload_size;
    return 0;
}

static PyObject *split_batch_columns(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &buf, &count)) return NULL;
    PyObject *cols[9] = {NULL};
    PyObject *result = NULL;
    StrCache sc = {{0}, {0}, {NULL}};
    int failed = 0; /* 1: bad data (return None), 2: Python error */
    const unsigned char *p = (const unsigned char *)buf.buf;
    Py_ssize_t end = buf.len;
    Cur c = {p, 0, end};
    /* every message takes 4 bytes at least: a larger count cannot be right */
    if (count < 0 || count > end / 4 + 1) { failed = 1; goto done; }
    for (int i = 0; i < 9; i++) {
        cols[i] = PyList_New(count);
        if (cols[i] == NULL) { failed = 2; goto done; }
    }
    Py_ssize_t out = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        Single m;
        if (parse_single(&c, end, &m)) { failed = 1; goto done; }
        /* the Python twin checks the properties and the key of compacted messages too */
        PyObject *ptuple = kv_tuple(&sc, p, m.prop_at, m.prop_len, m.nprops, 0, &failed);
        if (ptuple == NULL) goto done;
        PyObject *key = Py_None;
        if (m.key_at >= 0) {
            key = text(&sc, p, m.key_at, m.key_len);
            if (key == NULL) { Py_DECREF(ptuple); failed = 1; goto done; }
            if (m.null_key) { Py_DECREF(key); key = Py_None; }
        }
        if (key == Py_None) Py_INCREF(key);
        if (m.compacted) { Py_DECREF(ptuple); Py_DECREF(key); continue; }
        PyObject *items[9];
        items[0] = PyLong_FromSsize_t(index);
        items[1] = key;
        items[2] = m.ord_at >= 0 ? PyBytes_FromStringAndSize((const char *)p + m.ord_at, m.ord_len)
                               : Py_NewRef(Py_None);
        items[3] = ptuple;
        items[4] = m.event ? PyLong_FromUnsignedLongLong(m.event) : Py_NewRef(Py_None);
        items[5] = m.has_seq ? PyLong_FromUnsignedLongLong(m.seq) : Py_NewRef(Py_None);
        items[6] = PyBool_FromLong(m.is_null);
        items[7] = PyBytes_FromStringAndSize(m.is_null ? NULL : (const char *)p + m.value_at,
                                             m.is_null ? 0 : (Py_ssize_t)m.payload_size);
        items[8] = PyBool_FromLong(m.b64);
        int bad = 0;
        for (int i = 0; i < 9; i++) {
            if (items[i] == NULL) bad = 1;
            else PyList_SET_ITEM(cols[i], out, items[i]);
        }
        out++;
        if (bad) { failed = 2; goto done; }
    }
    if (c.pos != end) { failed = 1; goto done; }
    if (out < count) {
        for (int i = 0; i < 9; i++) {
            if (PyList_SetSlice(cols[i], out, count, NULL)) { failed = 2; goto done; }
        }
    }
    result = PyTuple_New(9);
    if (result == NULL) { failed = 2; goto done; }
    for (int i = 0; i < 9; i++) { PyTuple_SET_ITEM(result, i, cols[i]); cols[i] = NULL; }
done:
    for (int i = 0; i < 9; i++) Py_XDECREF(cols[i]);  /* NULL slots of a cut-short list are fine */
    cache_clear(&sc);
    PyBuffer_Release(&buf);
    if (failed == 2) return NULL;
    if (failed == 1) { PyErr_Clear(); Py_RETURN_NONE; }
    return result;
}

/* --- split_batch_into: a batch appended straight into a worker's column buffers -----------
 * split_batch_into(data, count, base_seq, cols) -> None | n (the rows appended)
 * cols: a tuple of 18 bytearrays, appended to in native byte order: batch_index (int32),
 * sequence_id (int64; absent: base_seq + index), is_null (int8), value offsets (int32, going on
 * from the last one already there), value bytes (b"" for a null value), key offsets (int32,
 * idem), key bytes (UTF-8), key valid (int8), then the 10 of ordering_key, properties and
 * event_time (_pulsar_rich.h: untouched while no row has one).
 * None, with nothing appended: what split_batch_columns declines, a sequence id past
 * INT64_MAX, or offsets past INT32_MAX (the caller's list path judges those). */
typedef struct { Py_ssize_t index, value_at, value_len, key_at, key_len; int64_t seq; int is_null; } Row;

/* strict UTF-8, as Python's decoder: no overlong forms, no surrogates, nothing past U+10FFFF */
static int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b < 0x80) { i++; continue; }
        int extra;
        uint32_t cp;
        if (b >= 0xC2 && b <= 0xDF) { extra = 1; cp = b & 0x1F; }
        else if (b >= 0xE0 && b <= 0xEF) { extra = 2; cp = b & 0x0F; }
        else if (b >= 0xF0 && b <= 0xF4) { extra = 3; cp = b & 0x07; }
        else return 0;
        if (n - i <= extra) return 0;
        for (int k = 1; k <= extra; k++) {
            unsigned char t = s[i + k];
            if ((t & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (t & 0x3F);
        }
        if (extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
        if (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
        i += extra + 1;
    }
    return 1;
}

static int32_t last_i32(PyObject *ba) {
    int32_t v;
    memcpy(&v, PyByteArray_AS_STRING(ba) + PyByteArray_GET_SIZE(ba) - 4, 4);
    return v;
}

/* room for ``extra`` more bytes at the end of ba (its length grows by extra); a pointer to
 * them, or NULL with an error set. cap < 0: CPython's own growth (by an eighth, each step a
 * realloc that may copy the whole buffer). cap >= 0: cap bytes at once for an empty buffer
 * (the most the caller expects it to hold; 0: no bound), then by half at a time but not past
 * cap, so a column filled an entry at a time is not copied some forty times on the way. */
static char *grow_to(PyObject *ba, Py_ssize_t extra, Py_ssize_t cap) {
    PyByteArrayObject *b = (PyByteArrayObject *)ba;
    Py_ssize_t len = PyByteArray_GET_SIZE(ba), need = len + extra;
    if (cap >= 0 && need + (b->ob_start - b->ob_bytes) + 1 > b->ob_alloc) {
        Py_ssize_t target = need + (need >> 1);
        if (cap > 0 && target > cap) target = cap > need ? cap : need;
        /* CPython makes an upsize past an eighth exact; the second resize below then only
         * moves the end (a "minor downsize") */
        if (target > need && PyByteArray_Resize(ba, target)) return NULL;
    }
    if (PyByteArray_Resize(ba, need)) return NULL;
    return PyByteArray_AS_STRING(ba) + len;
}

static char *grow(PyObject *ba, Py_ssize_t extra) { return grow_to(ba, extra, -1); }

/* the most a call expects its buffers to hold (grow_to's cap): rows in all, value bytes;
 * negative: no expectation (CPython's growth) */
typedef struct { Py_ssize_t rows, values; } Caps;

/* grow_to's cap for a column of ``width`` bytes a row (``extra`` more: an offsets column's 0) */
static Py_ssize_t rows_cap(Caps caps, Py_ssize_t width, Py_ssize_t extra) {
    return caps.rows < 0 ? -1 : width * (caps.rows + extra);
}

/* grow_to's cap for ba, which gets ``add`` bytes for ``n`` of its ``rows`` rows staged now:
 * as many bytes a row on the rows still to come */
static Py_ssize_t bytes_cap(Caps caps, PyObject *ba, Py_ssize_t rows, Py_ssize_t n, Py_ssize_t add) {
    if (caps.rows < 0) return -1;
    Py_ssize_t more = caps.rows - rows - n;
    return PyByteArray_GET_SIZE(ba) + add + (more > 0 ? more : 0) * (add / (n ? n : 1) + 1);
}

/* the latest time (ms) a Spark timestamp (int64 microseconds) holds: later ones are NULL (an
 * event time) or left to the Python path, which makes them NULL (a publish time) */
#define MAX_SPARK_MS ((uint64_t)(INT64_MAX / 1000 - 1))

#include "_pulsar_rich.h"

/* The count messages of a batch in p[pos, end) -> rows[0..*n) (compacted ones left out), their
 * ordering keys, properties and event times in the scratch rich (see _pulsar_rich.h), *tv / *tk
 * their value and key bytes. 0, 1 (declined: the Python twin judges it) or 2 (a Python error). */
static int split_rows(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count,
                      uint64_t base_seq, Row *rows, Rich *rich, Py_ssize_t *n, Py_ssize_t *tv,
                      Py_ssize_t *tk) {
    Cur c = {p, pos, end};
    Py_ssize_t out = 0, total_v = 0, total_k = 0;
    if (rich_begin(rich, count)) return 2;
    for (Py_ssize_t index = 0; index < count; index++) {
        Single m;
        if (parse_single(&c, end, &m)) return 1;
        /* the properties and the key of compacted messages are checked too (as the twin) */
        if (m.nprops) {
            int bad = rich_props(rich, p, m.prop_at, m.prop_len, m.nprops, 0);
            if (bad) return bad;
        }
        if (m.key_at >= 0 && !utf8_ok(p + m.key_at, m.key_len)) return 1;
        if (m.compacted) continue;
        uint64_t s = m.has_seq ? m.seq : base_seq + (uint64_t)index;
        if (s > (uint64_t)INT64_MAX || (!m.has_seq && s < base_seq)) return 1;
        rich_row(rich, m.event, m.ord_at, m.ord_len, m.nprops);
        Row *r = &rows[out++];
        r->index = index;
        r->seq = (int64_t)s;
        r->is_null = m.is_null;
        r->value_at = m.value_at;
        r->value_len = m.is_null ? 0 : (Py_ssize_t)m.payload_size;
        r->key_at = m.null_key ? -1 : m.key_at;
        r->key_len = m.null_key || m.key_at < 0 ? 0 : m.key_len;
        total_v += r->value_len;
        total_k += r->key_len;
    }
    if (c.pos != end) return 1;
    *n = out; *tv = total_v; *tk = total_k;
    return 0;
}

/* whether rows of tv value bytes and tk key bytes still fit the int32 offsets of ba[3], ba[5] */
static int rows_fit(PyObject **ba, Py_ssize_t tv, Py_ssize_t tk) {
    return (int64_t)last_i32(ba[3]) + (int64_t)tv <= INT32_MAX &&
           (int64_t)last_i32(ba[5]) + (int64_t)tk <= INT32_MAX;
}

/* append rows[0..n) (see split_rows; rows_fit checked) to the 8 split bytearrays; 0 or 2 */
static int write_rows(PyObject **ba, const unsigned char *p, const Row *rows, Py_ssize_t n,
                      Py_ssize_t tv, Py_ssize_t tk, Caps caps) {
    int32_t voff = last_i32(ba[3]), koff = last_i32(ba[5]);
    char *w[8];
    const Py_ssize_t widths[8] = {4, 8, 1, 4, 0, 4, 0, 1};
    Py_ssize_t more = caps.rows - PyByteArray_GET_SIZE(ba[2]);  /* ba[2]: a byte per row */
    for (int i = 0; i < 8; i++) {
        Py_ssize_t extra = i == 4 ? tv : i == 6 ? tk : widths[i] * n, cap = -1;
        if (caps.rows >= 0) {
            /* the keys: as many bytes per row as this entry's, on the rows to come */
            cap = i == 4 ? caps.values
                : i == 6 ? PyByteArray_GET_SIZE(ba[6]) + (more > n ? more : n) * (tk / (n ? n : 1) + 1)
                : widths[i] * (caps.rows + (i == 3 || i == 5));
        }
        w[i] = grow_to(ba[i], extra, cap);
        if (w[i] == NULL) return 2;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const Row *r = &rows[i];
        int32_t idx = (int32_t)r->index;
        memcpy(w[0] + 4 * i, &idx, 4);
        memcpy(w[1] + 8 * i, &r->seq, 8);
        w[2][i] = (char)r->is_null;
        if (r->value_len) { memcpy(w[4], p + r->value_at, (size_t)r->value_len); w[4] += r->value_len; }
        voff += (int32_t)r->value_len;
        memcpy(w[3] + 4 * i, &voff, 4);
        if (r->key_len) { memcpy(w[6], p + r->key_at, (size_t)r->key_len); w[6] += r->key_len; }
        koff += (int32_t)r->key_len;
        memcpy(w[5] + 4 * i, &koff, 4);
        w[7][i] = r->key_at >= 0;
    }
    return 0;
}

/* ``cols`` is a tuple of ``n`` bytearrays, those at ``off1`` and ``off2`` (offsets) not empty;
 * -1 with a TypeError otherwise */
static int check_cols(PyObject *cols, Py_ssize_t n, int off1, int off2, const char *who) {
    if (PyTuple_GET_SIZE(cols) != n) {
        PyErr_Format(PyExc_TypeError, "%s wants %zd bytearrays", who, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyTuple_GET_ITEM(cols, i);
        if (!PyByteArray_CheckExact(b) || ((i == off1 || i == off2) && PyByteArray_GET_SIZE(b) < 4)) {
            PyErr_Format(PyExc_TypeError, "%s wants %zd bytearrays (offsets not empty)", who, n);
            return -1;
        }
    }
    return 0;
}

static PyObject *split_batch_into(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t count;
    unsigned long long base_seq;
    PyObject *cols;
    if (!PyArg_ParseTuple(args, "y*nKO!", &buf, &count, &base_seq, &PyTuple_Type, &cols)) return NULL;
    if (check_cols(cols, 8 + RICH_COLS, 3, 5, "split_batch_into") ||
        check_rich(cols, 8, "split_batch_into")) { PyBuffer_Release(&buf); return NULL; }
    PyObject **ba = &PyTuple_GET_ITEM(cols, 0);
    PyObject *result = NULL;
    Rich rich = {0};
    Row *rows = NULL;
    int failed = 0; /* 1: declined (return None), 2: Python error */
    const unsigned char *p = (const unsigned char *)buf.buf;
    Py_ssize_t n = 0, tv = 0, tk = 0;
    if (count < 0 || count > buf.len / 4 + 1) { failed = 1; goto done; }
    rows = PyMem_Malloc(sizeof(Row) * (size_t)(count ? count : 1));
    if (rows == NULL) { PyErr_NoMemory(); failed = 2; goto done; }
    failed = split_rows(p, 0, buf.len, count, base_seq, rows, &rich, &n, &tv, &tk);
    if (failed) goto done;
    if (!rows_fit(ba, tv, tk) || !rich_fits(&rich, ba + 8)) { failed = 1; goto done; }
    /* the rich columns first: they fill in the rows staged before (is_null: one byte a row) */
    failed = rich_write(&rich, ba + 8, p, PyByteArray_GET_SIZE(ba[2]), (Caps){-1, -1});
    if (!failed) failed = write_rows(ba, p, rows, n, tv, tk, (Caps){-1, -1});
    if (failed) goto done;
    result = PyLong_FromSsize_t(n);
    if (result == NULL) failed = 2;
done:
    rich_free(&rich);
    PyMem_Free(rows);
    PyBuffer_Release(&buf);
    if (failed == 2) return NULL;
    if (failed == 1) { PyErr_Clear(); Py_RETURN_NONE; }
    return result;
}

/* --- MessageMetadata ---------------------------------------------------------------------- */
enum { K_NONE, K_U64, K_I32, K_I64, K_BOOL, K_STR, K_BYTES, K_KV, K_STRS, K_ENC };
#define MD_SLOTS 28
#define MD_MAX_FIELD 30
/* field number -> (slot in the dataclass's order, kind); mirrors MESSAGE_METADATA_FIELDS */
static const struct { int slot, kind; } MD_FIELDS[MD_MAX_FIELD + 1] = {
    [1] = {0, K_STR},    [2] = {1, K_U64},    [3] = {2, K_U64},    [4] = {3, K_KV},
    [5] = {4, K_STR},    [6] = {5, K_STR},    [7] = {6, K_STRS},   [8] = {7, K_I32},
    [9] = {8, K_U64},    [11] = {9, K_I32},   [12] = {10, K_U64},  [13] = {11, K_ENC},
    [14] = {12, K_STR},  [15] = {13, K_BYTES}, [16] = {14, K_BYTES}, [17] = {15, K_BOOL},
    [18] = {16, K_BYTES}, [19] = {17, K_I64}, [20] = {18, K_I32},  [22] = {19, K_U64},
    [23] = {20, K_U64},  [24] = {21, K_U64},  [25] = {22, K_BOOL}, [26] = {23, K_STR},
    [27] = {24, K_I32},  [28] = {25, K_I32},  [29] = {26, K_I32},  [30] = {27, K_BOOL},
};
#define MD_EVENT_TIME_SLOT 10

static PyObject *md_value(const unsigned char *p, Py_ssize_t at, Py_ssize_t len, int kind, uint64_t v) {
    switch (kind) {
    case K_U64: return PyLong_FromUnsignedLongLong(v);
    case K_I64: return PyLong_FromLongLong((int64_t)v);
    case K_I32: {
        int64_t s = (int64_t)v;
        if (s < INT32_MIN || s > INT32_MAX) return NULL;
        return PyLong_FromLongLong(s);
    }
    case K_BOOL: return PyBool_FromLong(v != 0);
    case K_BYTES: return PyBytes_FromStringAndSize((const char *)p + at, len);
    case K_KV: return key_value(NULL, p, at, at + len, 1);
    default: return text(NULL, p, at, len);  /* K_STR, K_STRS */
    }
}

static PyObject *message_metadata_values(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    PyObject *slots[MD_SLOTS] = {NULL};
    PyObject *result = NULL;
    int failed = 0;
    const unsigned char *p = (const unsigned char *)buf.buf;
    Cur c = {p, 0, buf.len};
    while (c.pos < buf.len) {
        uint64_t tag, v = 0;
        Py_ssize_t at = 0, len = 0;
        if (rd_varint(&c, buf.len, &tag)) { failed = 1; goto done; }
        int wire = (int)(tag & 7);
        uint64_t field = tag >> 3;
        if (field == 0) { failed = 1; goto done; }
        int kind = field <= MD_MAX_FIELD ? MD_FIELDS[field].kind : K_NONE;
        if (kind == K_NONE) {
            if (skip_field(&c, buf.len, wire)) { failed = 1; goto done; }
            continue;
        }
        int delimited = kind >= K_STR;
        if (wire != (delimited ? 2 : 0) || rd_varint(&c, buf.len, &v)) { failed = 1; goto done; }
        if (delimited) {
            if (v > (uint64_t)(buf.len - c.pos)) { failed = 1; goto done; }
            at = c.pos; len = (Py_ssize_t)v;
            c.pos += len;
        }
        if (kind == K_ENC) { failed = 1; goto done; }  /* rare: the Python twin builds those */
        int slot = MD_FIELDS[field].slot;
        PyObject *value = md_value(p, at, len, kind, v);
        if (value == NULL) { failed = PyErr_Occurred() ? 2 : 1; goto done; }
        if (kind == K_KV || kind == K_STRS) {
            if (slots[slot] == NULL) {
                slots[slot] = PyList_New(0);
                if (slots[slot] == NULL) { Py_DECREF(value); failed = 2; goto done; }
            }
            int r = PyList_Append(slots[slot], value);
            Py_DECREF(value);
            if (r) { failed = 2; goto done; }
        } else {
            Py_XSETREF(slots[slot], value);
        }
    }
    if (slots[0] == NULL || slots[1] == NULL || slots[2] == NULL) { failed = 1; goto done; }
    result = PyTuple_New(MD_SLOTS);
    if (result == NULL) { failed = 2; goto done; }
    for (int i = 0; i < MD_SLOTS; i++) {
        PyObject *value = slots[i];
        slots[i] = NULL;
        if (value != NULL && PyList_CheckExact(value)) {
            PyObject *t = PyList_AsTuple(value);
            Py_DECREF(value);
            if (t == NULL) { failed = 2; goto done; }
            value = t;
        } else if (value == NULL && (i == 3 || i == 6 || i == 11)) {
            value = PyTuple_New(0);
        } else if (value == NULL || (i == MD_EVENT_TIME_SLOT && PyLong_AsUnsignedLongLong(value) == 0)) {
            Py_XDECREF(value);
            value = Py_NewRef(Py_None);
        }
        PyTuple_SET_ITEM(result, i, value);
    }
done:
    for (int i = 0; i < MD_SLOTS; i++) Py_XDECREF(slots[i]);
    PyBuffer_Release(&buf);
    if (failed) { Py_CLEAR(result); }
    if (failed == 2) return NULL;
    if (failed == 1) { PyErr_Clear(); Py_RETURN_NONE; }
    return result;
}

#include "_pulsar_block.h"
#include "_pulsar_mlinfo.h"

static PyMethodDef methods[] = {
    {"split_batch_columns", split_batch_columns, METH_VARARGS,
     "A batch payload -> 9 column lists, or None for input the Python twin must judge."},
    {"split_batch_into", split_batch_into, METH_VARARGS,
     "A batch payload appended to 8 column bytearrays, or None for the list path."},
    {"decode_entries_into", decode_entries_into, METH_VARARGS,
     "A run of a packed block's entries checked and split into 16 column bytearrays."},
    {"message_ids_into", message_ids_into, METH_VARARGS,
     "prefix + str(i) for each int32 i appended to a message_id column's offsets and bytes."},
    {"crc32c", py_crc32c, METH_VARARGS,
     "crc32c(data, crc=0, hw=True): the CRC32C of data (hw=False: the table path)."},
    {"message_metadata_values", message_metadata_values, METH_VARARGS,
     "A MessageMetadata -> its 28 field values in order, or None for the Python twin."},
    {"managed_ledger_info_values", managed_ledger_info_values, METH_VARARGS,
     "A plain binary ManagedLedgerInfo -> (ledgers, terminated, properties) as tuples."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pulsar_speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pulsar_speedups(void) {
    crc32c_init();
    return PyModule_Create(&module);
}
