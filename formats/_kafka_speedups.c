/* The C twin of formats/kafka/columns.py's decode_columns_py: a Kafka batch's records region
 * (uncompressed, or the decompressed payload of a compressed batch) decoded straight into
 * columns. Any input it does not accept (a malformed record, or an int64 overflow it does not
 * compute) returns None: the caller then runs the pure-Python twin, which raises the precise
 * typed error (or computes the rare big value). No exception is raised for bad data.
 *
 * decode_columns(data: bytes-like, base_offset: int, base_timestamp: int, max_timestamp: int,
 *                log_append_time: bool, last_offset_delta: int, record_count: int,
 *                [lo: int, limit: int])
 *   -> None | (offsets: list[int], timestamps: list[int], keys: list[bytes|None],
 *              values: list[bytes|None], headers: list[tuple[tuple[str, bytes|None], ...]])
 * Every record is checked; only those at offset ``lo`` or above, at most ``limit`` of them
 * (-1: all), are emitted. With a row type (rows mode, arguments row_type, head, kind, tail):
 * one list of rows instead, each untracked by the garbage collector when it can never be in a
 * reference cycle (header tuples always are).
 *
 * A record is: length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
 * keyLength varint | key | valueLength varint | value | headerCount varint |
 * (keyLength varint | key utf-8 | valueLength varint | value)*, lengths -1 for null, varints
 * zig-zag (spec/kafka-segments.md).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* a zig-zag varint of at most max_bytes bytes ending before end; 0 ok, -1 not accepted */
static int rd_zigzag(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int max_bytes,
                     int64_t *out) {
    uint64_t raw = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*pos >= end) return -1;
        unsigned char b = p[(*pos)++];
        if (i == 9 && (b & 0x7E)) return -1; /* past 64 bits: out of int64 range */
        raw |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
    }
    return -1; /* longer than its type allows */
}

static int rd_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int64_t *out) {
    if (rd_zigzag(p, pos, end, 5, out)) return -1;
    return (*out < INT32_MIN || *out > INT32_MAX) ? -1 : 0;
}

/* a length-prefixed field: *obj a new bytes (or None, new reference; None too when not
 * ``want``ed: the field is checked and skipped) */
static int rd_bytes(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, PyObject **obj,
                    int *failed, int want) {
    int64_t n;
    if (rd_varint(p, pos, end, &n)) return -1;
    if (n < 0) {
        if (n != -1) return -1;
        Py_INCREF(Py_None);
        *obj = Py_None;
        return 0;
    }
    if (n > end - *pos) return -1;
    if (!want) {
        *pos += (Py_ssize_t)n;
        Py_INCREF(Py_None);
        *obj = Py_None;
        return 0;
    }
    *obj = PyBytes_FromStringAndSize((const char *)p + *pos, (Py_ssize_t)n);
    if (*obj == NULL) { *failed = 2; return -1; }
    *pos += (Py_ssize_t)n;
    return 0;
}

static PyObject *decode_columns(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long base_offset, base_ts, max_ts, last_delta, count;
    long long lo = INT64_MIN, limit = -1;
    int log_append;
    /* rows mode (row_type given): one list of row_type(*head, offset, timestamp, kind, key,
       value, headers, *tail), row_type a tuple subclass (a NamedTuple), head and tail tuples */
    PyObject *row_type = Py_None, *head = NULL, *kind = Py_None, *tail = NULL;
    if (!PyArg_ParseTuple(args, "y*LLLpLL|LLOO!OO!", &buf, &base_offset, &base_ts, &max_ts,
                          &log_append, &last_delta, &count, &lo, &limit, &row_type,
                          &PyTuple_Type, &head, &kind, &PyTuple_Type, &tail))
        return NULL;
    PyTypeObject *rtype = NULL;
    Py_ssize_t nhead = 0, ntail = 0;
    int untrack = 0;
    if (row_type != Py_None) {
        if (!PyType_Check(row_type) ||
            !PyType_IsSubtype((PyTypeObject *)row_type, &PyTuple_Type) || head == NULL ||
            tail == NULL) {
            PyBuffer_Release(&buf);
            PyErr_SetString(PyExc_TypeError,
                            "rows mode needs a tuple subclass, a head tuple, a kind and a tail tuple");
            return NULL;
        }
        rtype = (PyTypeObject *)row_type;
        nhead = PyTuple_GET_SIZE(head);
        ntail = PyTuple_GET_SIZE(tail);
        /* rows are untracked by the garbage collector when nothing in them can ever refer
           back to them: no instance dict, and head, kind and tail hold no tracked container
           (the rest is ints, bytes, None and tuples of str and bytes made here). CPython
           untracks such exact tuples itself at its next collection; doing it at birth spares
           the collections that thousands of tracked rows would trigger and walk. */
        untrack = rtype->tp_dictoffset == 0 && !PyObject_GC_IsTracked(kind);
        for (Py_ssize_t i = 0; untrack && i < nhead; i++)
            untrack = !PyObject_GC_IsTracked(PyTuple_GET_ITEM(head, i));
        for (Py_ssize_t i = 0; untrack && i < ntail; i++)
            untrack = !PyObject_GC_IsTracked(PyTuple_GET_ITEM(tail, i));
    }
    long long emitted = 0;
    const unsigned char *p = (const unsigned char *)buf.buf;
    Py_ssize_t size = buf.len, pos = 0;
    int failed = 0; /* 1: not accepted (None), 2: a Python error (memory) */
    PyObject *cols[5] = {NULL, NULL, NULL, NULL, NULL};
    PyObject *empty = PyTuple_New(0);
    PyObject *result = NULL;
    if (empty == NULL) { failed = 2; goto done; }
    for (int i = 0; i < (rtype ? 1 : 5); i++) {
        cols[i] = PyList_New(0);
        if (cols[i] == NULL) { failed = 2; goto done; }
    }
    int64_t previous = -1;
    for (long long n = 0; n < count; n++) {
        int64_t length, ts_delta, delta, hcount;
        if (pos >= size) { failed = 1; goto done; }
        if (rd_varint(p, &pos, size, &length)) { failed = 1; goto done; }
        if (length < 6 || length > size - pos) { failed = 1; goto done; }
        Py_ssize_t end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes */
        if (rd_zigzag(p, &pos, end, 10, &ts_delta) || rd_varint(p, &pos, end, &delta)) {
            failed = 1; goto done;
        }
        long long at;
        int want = 1; /* an overflow is refused below */
        if (!__builtin_add_overflow(base_offset, (long long)delta, &at))
            want = at >= lo && (limit < 0 || emitted < limit);
        PyObject *key = NULL, *value = NULL;
        if (rd_bytes(p, &pos, end, &key, &failed, want)) { if (!failed) failed = 1; goto done; }
        if (rd_bytes(p, &pos, end, &value, &failed, want)) {
            Py_DECREF(key);
            if (!failed) failed = 1;
            goto done;
        }
        if (rd_varint(p, &pos, end, &hcount) || hcount < 0 || hcount > end - pos) {
            Py_DECREF(key); Py_DECREF(value); failed = 1; goto done;
        }
        PyObject *headers;
        if (hcount == 0) {
            Py_INCREF(empty);
            headers = empty;
        } else {
            headers = PyTuple_New((Py_ssize_t)hcount);
            if (headers == NULL) { Py_DECREF(key); Py_DECREF(value); failed = 2; goto done; }
            for (int64_t h = 0; h < hcount; h++) {
                int64_t klen;
                if (rd_varint(p, &pos, end, &klen) || klen < 0 || klen > end - pos) {
                    failed = 1; break; /* a null key (-1) is refused too */
                }
                PyObject *hkey = PyUnicode_DecodeUTF8((const char *)p + pos, (Py_ssize_t)klen,
                                                      NULL);
                if (hkey == NULL) {
                    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { PyErr_Clear(); failed = 1; }
                    else failed = 2;
                    break;
                }
                pos += (Py_ssize_t)klen;
                PyObject *hvalue = NULL;
                if (rd_bytes(p, &pos, end, &hvalue, &failed, 1)) {
                    Py_DECREF(hkey);
                    if (!failed) failed = 1;
                    break;
                }
                PyObject *pair = PyTuple_Pack(2, hkey, hvalue);
                Py_DECREF(hkey); Py_DECREF(hvalue);
                if (pair == NULL) { failed = 2; break; }
                PyObject_GC_UnTrack(pair); /* a str and bytes or None: never in a cycle */
                PyTuple_SET_ITEM(headers, (Py_ssize_t)h, pair);
            }
            if (failed) { Py_DECREF(headers); Py_DECREF(key); Py_DECREF(value); goto done; }
            PyObject_GC_UnTrack(headers); /* untracked pairs only */
        }
        if (pos != end || delta < 0 || delta > last_delta || delta <= previous) {
            Py_DECREF(headers); Py_DECREF(key); Py_DECREF(value); failed = 1; goto done;
        }
        previous = delta;
        long long offset, ts;
        if (__builtin_add_overflow(base_offset, (long long)delta, &offset)) {
            Py_DECREF(headers); Py_DECREF(key); Py_DECREF(value); failed = 1; goto done;
        }
        if (log_append) ts = max_ts;
        else if (__builtin_add_overflow(base_ts, (long long)ts_delta, &ts)) {
            Py_DECREF(headers); Py_DECREF(key); Py_DECREF(value); failed = 1; goto done;
        }
        if (!want) {
            /* checked, not wanted: no objects for it */
            Py_DECREF(headers); Py_DECREF(key); Py_DECREF(value);
            continue;
        }
        emitted++;
        PyObject *o = PyLong_FromLongLong(offset), *t = PyLong_FromLongLong(ts);
        int bad;
        if (rtype != NULL) {
            /* the row built in place: a tuple subclass allocated with its items set */
            PyObject *row = (o == NULL || t == NULL) ? NULL : rtype->tp_alloc(rtype, nhead + 6 + ntail);
            bad = row == NULL;
            if (!bad) {
                Py_ssize_t at_item = 0;
                for (Py_ssize_t i = 0; i < nhead; i++) {
                    PyObject *item = PyTuple_GET_ITEM(head, i);
                    Py_INCREF(item);
                    PyTuple_SET_ITEM(row, at_item++, item);
                }
                PyObject *mid[6] = {o, t, kind, key, value, headers};
                for (int i = 0; i < 6; i++) {
                    Py_INCREF(mid[i]);
                    PyTuple_SET_ITEM(row, at_item++, mid[i]);
                }
                for (Py_ssize_t i = 0; i < ntail; i++) {
                    PyObject *item = PyTuple_GET_ITEM(tail, i);
                    Py_INCREF(item);
                    PyTuple_SET_ITEM(row, at_item++, item);
                }
                if (untrack) PyObject_GC_UnTrack(row);
                bad = PyList_Append(cols[0], row);
                Py_DECREF(row);
            }
        } else {
            bad = o == NULL || t == NULL || PyList_Append(cols[0], o) ||
                  PyList_Append(cols[1], t) || PyList_Append(cols[2], key) ||
                  PyList_Append(cols[3], value) || PyList_Append(cols[4], headers);
        }
        Py_XDECREF(o); Py_XDECREF(t);
        Py_DECREF(key); Py_DECREF(value); Py_DECREF(headers);
        if (bad) { failed = 2; goto done; }
    }
    if (pos != size) { failed = 1; goto done; }
    if (rtype != NULL) {
        result = cols[0];
        Py_INCREF(result);
    } else
        result = PyTuple_Pack(5, cols[0], cols[1], cols[2], cols[3], cols[4]);
    if (result == NULL) failed = 2;
done:
    for (int i = 0; i < 5; i++) Py_XDECREF(cols[i]);
    Py_XDECREF(empty);
    PyBuffer_Release(&buf);
    if (failed == 1) { PyErr_Clear(); Py_RETURN_NONE; }
    if (failed == 2) { Py_XDECREF(result); return NULL; }
    return result;
}

static PyMethodDef methods[] = {
    {"decode_columns", decode_columns, METH_VARARGS,
     "A records region decoded into five column lists (or, given a row type, one list of "
     "rows), or None when not accepted."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kafka_speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kafka_speedups(void) { return PyModule_Create(&module); }
