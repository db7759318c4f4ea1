/*
 * formats._speedups: the per-entry loops of the format, in C.
 *
 * Each function does exactly what their pure-Python twins in formats/framing.py do (the tests
 * run both on the same inputs, hypothesis included); formats.framing picks this module when
 * it is built and falls back to Python otherwise. Pure: bytes in, values out, no I/O.
 *
 *   frame_entries(buf, pos, first_entry_id, payloads, limit) -> (pos, count)
 *       writes [length i32 BE][entry id i64 BE][payload] for each payload into the writable
 *       buffer ``buf`` from ``pos``; stops before the first entry that would end past
 *       ``limit`` and returns the position after the last entry written and how many were.
 *
 *   parse_entries(buf, off, limit, first_id, last_id, entry_type, base, learn_next,
 *                 learn_interval, learned) -> (entries, off, next_id, learn_next)
 *       reads consecutive entries of ``buf`` (bytes) from ``off``: stops at ``last_id``, at a
 *       header that does not fit before ``limit``, a negative length (block padding), an
 *       unexpected entry id, or an entry ending past ``limit``. Returns entry_type(id,
 *       payload) tuples; ``entry_type`` is a tuple subclass of two fields (a NamedTuple).
 *       Every entry that starts at an object offset (base + off) >= learn_next appends
 *       (entry id, object offset) to ``learned`` and moves learn_next interval bytes on.
 *
 *   pack_entries(buf, off, limit, first_id[, last_id, base, learn_next, learn_interval,
 *                learned]) -> (data, offsets, count, stop, learn_next)
 *       the consecutive entries of ``buf[off:limit]`` (any contiguous buffer), ids from
 *       ``first_id`` up to ``last_id`` when given, packed the way Arrow lays out a binary
 *       column: ``data`` is every payload back to back (bytes), ``offsets`` count + 1 native
 *       int32 offsets into it (bytes). ``stop`` is where the entries end: ``limit``, after
 *       ``last_id``, a negative length (padding), a header cut off by ``limit``, an
 *       unexpected entry id, or an entry running past ``limit`` (the caller tells which).
 *       With a ``learned`` list, offsets are learned as parse_entries learns them. The
 *       copy runs without the GIL.
 *
 *   pack_into(out, out_pos, offsets, index, buf, off, limit, first_id)
 *           -> (out_pos, count, stop)
 *       pack_entries into buffers the caller owns: the payloads of the consecutive entries
 *       of ``buf[off:limit]`` are copied to ``out`` from ``out_pos`` and their end positions
 *       written as native int32 to ``offsets[index + 1 ..]`` (``offsets[index]`` is the
 *       caller's: ``out_pos``). Stops like pack_entries (no last id), and before an entry
 *       ``out`` or ``offsets`` has no room for. The copy runs without the GIL.
 *
 *   framed_prefix(lengths) -> (prefix, smallest, largest)
 *       ``prefix``: len(lengths) + 1 native int64 (bytes), prefix[i] = the framed bytes
 *       (12 + length) of entries 0..i-1; with the smallest and largest length (0, 0 if none).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ENTRY_HEADER_LEN 12

static inline void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static inline void put_be64(unsigned char *p, uint64_t v) {
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static inline uint32_t get_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t get_be64(const unsigned char *p) {
    return ((uint64_t)get_be32(p) << 32) | get_be32(p + 4);
}

static PyObject *frame_entries(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out;
    Py_ssize_t pos, limit;
    long long first_id;
    PyObject *payloads;
    if (!PyArg_ParseTuple(args, "w*nLOn", &out, &pos, &first_id, &payloads, &limit)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(payloads, "payloads must be a sequence");
    if (seq == NULL) {
        PyBuffer_Release(&out);
        return NULL;
    }
    if (pos < 0 || limit > out.len || pos > limit) {
        PyErr_SetString(PyExc_ValueError, "frame_entries: pos/limit outside the buffer");
        goto fail;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), count = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    unsigned char *dst = (unsigned char *)out.buf;
    for (; count < n; count++) {
        PyObject *item = items[count];
        const char *data;
        Py_ssize_t size;
        Py_buffer view;
        int has_view = 0;
        if (PyBytes_CheckExact(item)) {
            data = PyBytes_AS_STRING(item);
            size = PyBytes_GET_SIZE(item);
        } else {
            if (PyObject_GetBuffer(item, &view, PyBUF_CONTIG_RO) < 0) {
                goto fail;
            }
            has_view = 1;
            data = (const char *)view.buf;
            size = view.len;
        }
        if (size > INT32_MAX || ENTRY_HEADER_LEN + size > limit - pos) {
            if (has_view) PyBuffer_Release(&view);
            break;
        }
        put_be32(dst + pos, (uint32_t)size);
        put_be64(dst + pos + 4, (uint64_t)(first_id + count));
        memcpy(dst + pos + ENTRY_HEADER_LEN, data, (size_t)size);
        if (has_view) PyBuffer_Release(&view);
        pos += ENTRY_HEADER_LEN + size;
    }
    Py_DECREF(seq);
    PyBuffer_Release(&out);
    return Py_BuildValue("nn", pos, count);
fail:
    Py_DECREF(seq);
    PyBuffer_Release(&out);
    return NULL;
}

static PyObject *parse_entries(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *buf, *learned;
    PyTypeObject *entry_type;
    Py_ssize_t off, limit;
    long long cur_id, last_id, base, learn_next, learn_interval;
    if (!PyArg_ParseTuple(args, "O!nnLLO!LLLO!", &PyBytes_Type, &buf, &off, &limit, &cur_id,
                          &last_id, &PyType_Type, &entry_type, &base, &learn_next,
                          &learn_interval, &PyList_Type, &learned)) {
        return NULL;
    }
    if (!PyType_IsSubtype(entry_type, &PyTuple_Type) ||
        entry_type->tp_basicsize != PyTuple_Type.tp_basicsize ||
        entry_type->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "entry_type must be a plain tuple subclass");
        return NULL;
    }
    Py_ssize_t len = PyBytes_GET_SIZE(buf);
    if (limit > len) limit = len;
    if (off < 0) {
        PyErr_SetString(PyExc_ValueError, "parse_entries: negative offset");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(buf);
    PyObject *entries = PyList_New(0);
    if (entries == NULL) return NULL;
    while (cur_id <= last_id && off <= limit - ENTRY_HEADER_LEN) {
        uint32_t length = get_be32(p + off);
        if (length & 0x80000000u) break;
        if ((long long)get_be64(p + off + 4) != cur_id) break;
        if ((Py_ssize_t)length > limit - off - ENTRY_HEADER_LEN) break;
        if (base + off >= learn_next) {
            PyObject *pair = Py_BuildValue("(LL)", cur_id, base + off);
            if (pair == NULL || PyList_Append(learned, pair) < 0) {
                Py_XDECREF(pair);
                goto fail;
            }
            Py_DECREF(pair);
            learn_next = base + off + learn_interval;
        }
        PyObject *payload = PyBytes_FromStringAndSize((const char *)p + off + ENTRY_HEADER_LEN,
                                                      (Py_ssize_t)length);
        if (payload == NULL) goto fail;
        PyObject *id = PyLong_FromLongLong(cur_id);
        if (id == NULL) {
            Py_DECREF(payload);
            goto fail;
        }
        PyObject *entry = entry_type->tp_alloc(entry_type, 2);
        if (entry == NULL) {
            Py_DECREF(payload);
            Py_DECREF(id);
            goto fail;
        }
        PyTuple_SET_ITEM(entry, 0, id);
        PyTuple_SET_ITEM(entry, 1, payload);
        /* an int and a bytes object cannot be part of a cycle: the collector would untrack
         * this tuple at its first pass anyway; untracking it now keeps those passes cheap */
        PyObject_GC_UnTrack(entry);
        int rc = PyList_Append(entries, entry);
        Py_DECREF(entry);
        if (rc < 0) goto fail;
        off += ENTRY_HEADER_LEN + (Py_ssize_t)length;
        cur_id++;
    }
    PyObject *result = Py_BuildValue("(NnLL)", entries, off, cur_id, learn_next);
    return result;
fail:
    Py_DECREF(entries);
    return NULL;
}

static PyObject *pack_entries(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer in;
    Py_ssize_t off, limit;
    long long first_id, last_id = LLONG_MAX, base = 0, learn_next = LLONG_MAX, learn_interval = 0;
    PyObject *learned = NULL;
    if (!PyArg_ParseTuple(args, "y*nnL|LLLLO!", &in, &off, &limit, &first_id, &last_id, &base,
                          &learn_next, &learn_interval, &PyList_Type, &learned)) {
        return NULL;
    }
    if (off < 0 || limit > in.len || off > limit) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "pack_entries: off/limit outside the buffer");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)in.buf;
    Py_ssize_t pos = off, count = 0;
    long long total = 0, cur_id = first_id;
    while (pos < limit && cur_id <= last_id) {
        Py_ssize_t remaining = limit - pos;
        if (remaining < 4 || (p[pos] & 0x80)) break;
        if (remaining < ENTRY_HEADER_LEN) break;
        uint32_t length = get_be32(p + pos);
        if ((long long)get_be64(p + pos + 4) != cur_id) break;
        if ((Py_ssize_t)length > remaining - ENTRY_HEADER_LEN) break;
        if (learned != NULL && base + pos >= learn_next) {
            PyObject *pair = Py_BuildValue("(LL)", cur_id, base + pos);
            if (pair == NULL || PyList_Append(learned, pair) < 0) {
                Py_XDECREF(pair);
                PyBuffer_Release(&in);
                return NULL;
            }
            Py_DECREF(pair);
            learn_next = base + pos + learn_interval;
        }
        total += length;
        count++;
        cur_id++;
        pos += ENTRY_HEADER_LEN + (Py_ssize_t)length;
    }
    if (total > INT32_MAX) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_OverflowError, "pack_entries: over 2 GiB of payload");
        return NULL;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, (count + 1) * (Py_ssize_t)sizeof(int32_t));
    if (data == NULL || offsets == NULL) {
        Py_XDECREF(data);
        Py_XDECREF(offsets);
        PyBuffer_Release(&in);
        return NULL;
    }
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(data);
    int32_t *out = (int32_t *)PyBytes_AS_STRING(offsets);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t at = off;
    int32_t filled = 0;
    out[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t length = get_be32(p + at);
        memcpy(dst + filled, p + at + ENTRY_HEADER_LEN, length);
        filled += (int32_t)length;
        out[i + 1] = filled;
        at += ENTRY_HEADER_LEN + (Py_ssize_t)length;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    return Py_BuildValue("(NNnnL)", data, offsets, count, pos, learn_next);
}

static PyObject *pack_into(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out, offs, in;
    Py_ssize_t out_pos, index, off, limit;
    long long first_id;
    if (!PyArg_ParseTuple(args, "w*nw*ny*nnL", &out, &out_pos, &offs, &index, &in, &off, &limit,
                          &first_id)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t cap = offs.len / (Py_ssize_t)sizeof(int32_t);
    if (off < 0 || limit > in.len || off > limit || out_pos < 0 || out_pos > out.len ||
        out_pos > INT32_MAX || index < 0 || index >= cap) {
        PyErr_SetString(PyExc_ValueError, "pack_into: a position outside its buffer");
        goto done;
    }
    const unsigned char *p = (const unsigned char *)in.buf;
    Py_ssize_t pos = off, count = 0, room = out.len - out_pos;
    if (room > INT32_MAX - out_pos) room = INT32_MAX - out_pos;
    long long total = 0, cur_id = first_id;
    while (pos < limit && index + count + 1 < cap) {
        Py_ssize_t remaining = limit - pos;
        if (remaining < ENTRY_HEADER_LEN || (p[pos] & 0x80)) break;
        uint32_t length = get_be32(p + pos);
        if ((long long)get_be64(p + pos + 4) != cur_id) break;
        if ((Py_ssize_t)length > remaining - ENTRY_HEADER_LEN) break;
        if ((long long)length > room - total) break;
        total += length;
        count++;
        cur_id++;
        pos += ENTRY_HEADER_LEN + (Py_ssize_t)length;
    }
    unsigned char *dst = (unsigned char *)out.buf;
    int32_t *o = (int32_t *)offs.buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t at = off, filled = out_pos;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t length = get_be32(p + at);
        memcpy(dst + filled, p + at + ENTRY_HEADER_LEN, length);
        filled += (Py_ssize_t)length;
        o[index + 1 + i] = (int32_t)filled;
        at += ENTRY_HEADER_LEN + (Py_ssize_t)length;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(nnn)", out_pos + (Py_ssize_t)total, count, pos);
done:
    PyBuffer_Release(&out);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&in);
    return result;
}

static PyObject *framed_prefix(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "lengths must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    int64_t *prefix = (int64_t *)PyBytes_AS_STRING(out);
    long long smallest = 0, largest = 0, total = 0;
    prefix[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long length = PyLong_AsLongLong(items[i]);
        if (length == -1 && PyErr_Occurred()) goto fail;
        if (i == 0 || length < smallest) smallest = length;
        if (i == 0 || length > largest) largest = length;
        if (length > INT64_MAX / 2 - total) {
            PyErr_SetString(PyExc_OverflowError, "framed_prefix: the lengths overflow");
            goto fail;
        }
        total += ENTRY_HEADER_LEN + length;
        prefix[i + 1] = total;
    }
    Py_DECREF(seq);
    return Py_BuildValue("(NLL)", out, smallest, largest);
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"frame_entries", frame_entries, METH_VARARGS,
     "frame_entries(buf, pos, first_entry_id, payloads, limit) -> (pos, count)"},
    {"parse_entries", parse_entries, METH_VARARGS,
     "parse_entries(buf, off, limit, first_id, last_id, entry_type, base, learn_next, "
     "learn_interval, learned) -> (entries, off, next_id, learn_next)"},
    {"pack_entries", pack_entries, METH_VARARGS,
     "pack_entries(buf, off, limit, first_id[, last_id, base, learn_next, learn_interval, "
     "learned]) -> (data, offsets, count, stop, learn_next)"},
    {"pack_into", pack_into, METH_VARARGS,
     "pack_into(out, out_pos, offsets, index, buf, off, limit, first_id) -> (out_pos, count, "
     "stop)"},
    {"framed_prefix", framed_prefix, METH_O,
     "framed_prefix(lengths) -> (prefix int64 bytes, smallest, largest)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "formats._speedups",
    "C versions of the per-entry loops of formats.framing (see formats/_speedups.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
