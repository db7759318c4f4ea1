/* C twin of formats/pulsar/batch.py's split_columns: a Pulsar batch payload (decompressed)
 * split into per-column lists in one pass. Any input it does not accept (malformed, or a
 * field layout it does not handle) returns None: the caller then runs the pure-Python twin,
 * which raises the precise typed error. No exception is raised for bad data.
 *
 * split_batch_columns(data: bytes-like, count: int) -> None | tuple of 9 lists:
 *   batch_index (int), key (str|None), ordering_key (bytes|None), properties (tuple of
 *   (str, str) tuples), event_time (int|None; 0 = None), sequence_id (int|None),
 *   is_null (bool), value (bytes; b"" when null), key_b64 (bool)
 * compacted_out messages are skipped (their index still counts).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct { const unsigned char *p; Py_ssize_t pos, end; } Cur;

static int rd_varint(Cur *c, Py_ssize_t end, uint64_t *out) {
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

/* a KeyValue message in [pos, end) -> new (key, value) tuple, NULL (no error set) if bad */
static PyObject *key_value(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end) {
    Cur c = {p, pos, end};
    PyObject *k = NULL, *v = NULL;
    while (c.pos < end) {
        uint64_t tag, len;
        if (rd_varint(&c, end, &tag)) goto bad;
        int wire = (int)(tag & 7);
        uint64_t field = tag >> 3;
        if (wire == 2 && (field == 1 || field == 2)) {
            if (rd_varint(&c, end, &len) || len > (uint64_t)(end - c.pos)) goto bad;
            PyObject *s = PyUnicode_DecodeUTF8((const char *)p + c.pos, (Py_ssize_t)len, NULL);
            if (s == NULL) { PyErr_Clear(); goto bad; }
            if (field == 1) { Py_XSETREF(k, s); } else { Py_XSETREF(v, s); }
            c.pos += (Py_ssize_t)len;
        } else if (skip_field(&c, end, wire)) goto bad;
    }
    if (k == NULL || v == NULL) goto bad;
    {
        PyObject *t = PyTuple_Pack(2, k, v);
        Py_DECREF(k); Py_DECREF(v);
        return t;
    }
bad:
    Py_XDECREF(k); Py_XDECREF(v);
    return NULL;
}

static int append_steal(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

static PyObject *split_batch_columns(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &buf, &count)) return NULL;
    PyObject *cols[9] = {NULL};
    PyObject *result = NULL;
    int failed = 0; /* 1: bad data (return None), 2: Python error */
    for (int i = 0; i < 9; i++) {
        cols[i] = PyList_New(0);
        if (cols[i] == NULL) { failed = 2; goto done; }
    }
    const unsigned char *p = (const unsigned char *)buf.buf;
    Py_ssize_t end = buf.len;
    Cur c = {p, 0, end};
    if (count < 0) { failed = 1; goto done; }
    for (Py_ssize_t index = 0; index < count; index++) {
        if (end - c.pos < 4) { failed = 1; goto done; }
        int32_t size = (int32_t)(((uint32_t)p[c.pos] << 24) | ((uint32_t)p[c.pos + 1] << 16) |
                                 ((uint32_t)p[c.pos + 2] << 8) | (uint32_t)p[c.pos + 3]);
        c.pos += 4;
        if (size < 0 || size > end - c.pos) { failed = 1; goto done; }
        Py_ssize_t stop = c.pos + size;
        Py_ssize_t key_at = -1, key_len = 0, ord_at = -1, ord_len = 0;
        int64_t payload_size = -1;
        uint64_t event = 0, seq = 0;
        int has_seq = 0, compacted = 0, is_null = 0, b64 = 0, null_key = 0;
        PyObject *props = PyList_New(0);
        if (props == NULL) { failed = 2; goto done; }
        while (c.pos < stop) {
            uint64_t tag, v;
            if (rd_varint(&c, stop, &tag)) { Py_DECREF(props); failed = 1; goto done; }
            int wire = (int)(tag & 7);
            uint64_t field = tag >> 3;
            if (field == 0) { Py_DECREF(props); failed = 1; goto done; }
            if (field >= 3 && field <= 10 && field != 7) {
                if (wire != 0 || rd_varint(&c, stop, &v)) { Py_DECREF(props); failed = 1; goto done; }
                switch (field) {
                case 3: payload_size = v < ((uint64_t)1 << 31) ? (int64_t)v : -1; break;
                case 4: compacted = v != 0; break;
                case 5: event = v; break;
                case 6: b64 = v != 0; break;
                case 8: seq = v; has_seq = 1; break;
                case 9: is_null = v != 0; break;
                case 10: null_key = v != 0; break;
                }
            } else if (field == 1 || field == 2 || field == 7) {
                if (wire != 2 || rd_varint(&c, stop, &v) || v > (uint64_t)(stop - c.pos)) {
                    Py_DECREF(props); failed = 1; goto done;
                }
                if (field == 1) {
                    PyObject *kv = key_value(p, c.pos, c.pos + (Py_ssize_t)v);
                    if (kv == NULL) { Py_DECREF(props); failed = PyErr_Occurred() ? 2 : 1; goto done; }
                    if (append_steal(props, kv)) { Py_DECREF(props); failed = 2; goto done; }
                } else if (field == 2) { key_at = c.pos; key_len = (Py_ssize_t)v; }
                else { ord_at = c.pos; ord_len = (Py_ssize_t)v; }
                c.pos += (Py_ssize_t)v;
            } else if (skip_field(&c, stop, wire)) { Py_DECREF(props); failed = 1; goto done; }
        }
        if (payload_size < 0 || payload_size > end - c.pos) { Py_DECREF(props); failed = 1; goto done; }
        Py_ssize_t value_at = c.pos;
        c.pos += (Py_ssize_t)payload_size;
        if (compacted) { Py_DECREF(props); continue; }
        PyObject *key = Py_None;
        if (key_at >= 0 && !null_key) {
            key = PyUnicode_DecodeUTF8((const char *)p + key_at, key_len, NULL);
            if (key == NULL) { PyErr_Clear(); Py_DECREF(props); failed = 1; goto done; }
        } else Py_INCREF(key);
        PyObject *ptuple = PyList_AsTuple(props);
        Py_DECREF(props);
        if (append_steal(cols[0], PyLong_FromSsize_t(index)) ||
            append_steal(cols[1], key) ||
            append_steal(cols[2], ord_at >= 0 ? PyBytes_FromStringAndSize((const char *)p + ord_at, ord_len)
                                              : (Py_INCREF(Py_None), Py_None)) ||
            append_steal(cols[3], ptuple) ||
            append_steal(cols[4], event ? PyLong_FromUnsignedLongLong(event) : (Py_INCREF(Py_None), Py_None)) ||
            append_steal(cols[5], has_seq ? PyLong_FromUnsignedLongLong(seq) : (Py_INCREF(Py_None), Py_None)) ||
            append_steal(cols[6], PyBool_FromLong(is_null)) ||
            append_steal(cols[7], is_null ? PyBytes_FromStringAndSize(NULL, 0)
                                          : PyBytes_FromStringAndSize((const char *)p + value_at, (Py_ssize_t)payload_size)) ||
            append_steal(cols[8], PyBool_FromLong(b64))) {
            failed = 2; goto done;
        }
    }
    if (c.pos != end) { failed = 1; goto done; }
    result = PyTuple_New(9);
    if (result == NULL) { failed = 2; goto done; }
    for (int i = 0; i < 9; i++) { PyTuple_SET_ITEM(result, i, cols[i]); cols[i] = NULL; }
done:
    for (int i = 0; i < 9; i++) Py_XDECREF(cols[i]);
    PyBuffer_Release(&buf);
    if (failed == 2) return NULL;
    if (failed == 1) { PyErr_Clear(); Py_RETURN_NONE; }
    return result;
}

static PyMethodDef methods[] = {
    {"split_batch_columns", split_batch_columns, METH_VARARGS,
     "A batch payload -> 9 column lists, or None for input the Python twin must judge."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pulsar_speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pulsar_speedups(void) { return PyModule_Create(&module); }
