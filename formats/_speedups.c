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
 *   pack_entries(buf, off, limit, first_id[, last_id, base, learn_next, learn_interval,
 *                learned]) -> (data, offsets, count, stop, learn_next)
 *       the consecutive entries of ``buf[off:limit]`` (any contiguous buffer), ids from
 *       ``first_id`` up to ``last_id`` when given, packed the way Arrow lays out a binary
 *       column: ``data`` is every payload back to back (bytes), ``offsets`` count + 1 native
 *       int32 offsets into it (bytes). ``stop`` is where the entries end: ``limit``, after
 *       ``last_id``, a negative length (padding), a header cut off by ``limit``, an
 *       unexpected entry id, or an entry running past ``limit`` (the caller tells which).
 *       With a ``learned`` list, every entry that starts at an object offset (base + its
 *       position) >= learn_next appends (entry id, object offset) to it and moves
 *       learn_next interval bytes on. The copy runs without the GIL.
 *
 *   span_entries(buf, off, limit, first_id[, last_id, base, learn_next, learn_interval,
 *                learned]) -> (starts, lengths, count, stop, learn_next)
 *       pack_entries without the copy: where each payload is in ``buf`` (``starts``,
 *       ``lengths``: count native int64 each, as bytes).
 *
 *   iter_span_entries(buf, starts, lengths, first_id, entry_type) -> iterator
 *       the entries span_entries found, made one at a time as the iterator is advanced:
 *       entry_type(first_id + i, bytes of buf[starts[i] : starts[i] + lengths[i]]) for each
 *       i (``starts``, ``lengths``: arrays of 8-byte integers, the same count).
 *       Every span must lie inside ``buf`` (ValueError when the iterator is made). An entry
 *       the caller has dropped is recycled: the entry made two steps before (a ``for``
 *       loop's previous one), if only the iterator still holds it, gets the next id and
 *       payload, and keeps its bytes object for the payload too if only it holds that and
 *       the lengths are equal (its cached hash reset). Nothing else can see an object that
 *       nothing else holds, so this is invisible, and it saves an allocation and a free of a
 *       tuple and a payload per entry (CPython's zip() reuses its result tuple alike). An
 *       entry or payload the caller keeps is never touched. The iterator holds ``buf``
 *       until it is done.
 *
 *   pack_into(out, out_pos, offsets, index, buf, off, limit, first_id)
 *           -> (out_pos, count, stop)
 *       pack_entries into buffers the caller owns: the payloads of the consecutive entries
 *       of ``buf[off:limit]`` are copied to ``out`` from ``out_pos`` and their end positions
 *       written as native int32 to ``offsets[index + 1 ..]`` (``offsets[index]`` is the
 *       caller's: ``out_pos``). Stops like pack_entries (no last id), and before an entry
 *       ``out`` or ``offsets`` has no room for. The copy runs without the GIL.
 *
 *   zeroed_bytearray(size) -> bytearray
 *       ``bytearray(size)`` whose zeroing (the page faults of a fresh 64 MiB block buffer:
 *       tens of milliseconds) runs without the GIL, so a thread can prepare buffers while
 *       another frames entries.
 *
 *   scratch_bytearray(size) -> bytearray
 *       ``bytearray(size)`` without the zeroing: its bytes are whatever the allocator gave
 *       (fresh pages for a large one); for buffers the caller fills entirely (a part read
 *       from a file), so their pages are touched once. Twin: ``bytearray(size)``.
 *
 *   framed_prefix(lengths) -> (prefix, smallest, largest)
 *       ``prefix``: len(lengths) + 1 native int64 (bytes), prefix[i] = the framed bytes
 *       (12 + length) of entries 0..i-1; with the smallest and largest length (0, 0 if none).
 *
 *   frame_spans(buf, pos, first_entry_id, data, starts, lengths, index, count, limit)
 *       -> (pos, count)
 *       frame_entries for payloads given as spans of one buffer: span j is
 *       data[starts[j] : starts[j] + lengths[j]] (starts, lengths: array('q')); frames spans
 *       index .. index + count - 1, stopping before the first that would end past ``limit``.
 *       A span outside ``data`` raises ValueError (nothing is read outside it). The copy runs
 *       without the GIL.
 *
 *   record_spans(buf, offsets, base, end) -> (starts, lengths, bad, reason)
 *       checks the local ledger file's records (length u32 BE | crc32c u32 BE | payload, the
 *       CRC over the 4 length bytes then the payload; offloader/ledgers/fileformat.py) held in
 *       ``buf``, which starts at file offset ``base``: record i starts at file offset
 *       offsets[i] (an array of 8-byte ints) and ends where record i + 1 starts, the last at
 *       ``end``. Returns every payload's start in ``buf`` and length as native int64 (bytes);
 *       at the first bad record it stops: ``bad`` is its index (else -1), ``reason`` "header"
 *       (the header is not inside ``buf``), "length" (the length field does not match the
 *       record's end, or the record runs past ``buf``) or "crc" (else None), and the arrays
 *       hold the records before it. The CRC loop runs without the GIL.
 *
 *   crc32c_c(data, value=0, software=False) -> int
 *       the CRC32C these loops use (SSE4.2 when the CPU has it, else a table), exposed only
 *       so that the tests compare it with the crc32c package; CRC32C_HARDWARE says which runs.
 *
 *   crc32c_combine(crc_a, crc_b, length_b) -> int
 *       the CRC32C of A + B from the CRC32C of A, that of B and B's length (no byte read):
 *       a segment's whole-file CRC32C joined from its parts', a block's from its spans'.
 *       Pure twin: formats/crc_combine.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#ifdef MADV_POPULATE_WRITE
#define OFFLOADER_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define OFFLOADER_MADV_POPULATE_WRITE 23 /* Linux's value, for older C library headers */
#endif
#endif

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

/* The walk pack_entries and span_entries share: the consecutive entries of p[off:limit]
 * with ids from first_id up to last_id, learning offsets into ``learned`` (if not NULL).
 * Sets *count, *total (payload bytes), *stop; returns -1 on a Python error. */
static int walk_entries(const unsigned char *p, Py_ssize_t off, Py_ssize_t limit,
                        long long first_id, long long last_id, long long base,
                        long long *learn_next, long long learn_interval, PyObject *learned,
                        Py_ssize_t *count, long long *total, Py_ssize_t *stop) {
    Py_ssize_t pos = off, n = 0;
    long long sum = 0, cur_id = first_id;
    while (pos < limit && cur_id <= last_id) {
        Py_ssize_t remaining = limit - pos;
        if (remaining < 4 || (p[pos] & 0x80)) break;
        if (remaining < ENTRY_HEADER_LEN) break;
        uint32_t length = get_be32(p + pos);
        if ((long long)get_be64(p + pos + 4) != cur_id) break;
        if ((Py_ssize_t)length > remaining - ENTRY_HEADER_LEN) break;
        if (learned != NULL && base + pos >= *learn_next) {
            PyObject *pair = Py_BuildValue("(LL)", cur_id, base + pos);
            if (pair == NULL || PyList_Append(learned, pair) < 0) {
                Py_XDECREF(pair);
                return -1;
            }
            Py_DECREF(pair);
            *learn_next = base + pos + learn_interval;
        }
        sum += length;
        n++;
        cur_id++;
        pos += ENTRY_HEADER_LEN + (Py_ssize_t)length;
    }
    *count = n;
    *total = sum;
    *stop = pos;
    return 0;
}

/* pack_entries (copy != 0) and span_entries (copy == 0): one walk, then either the
 * payloads copied back to back with int32 offsets, or int64 starts and lengths. */
static PyObject *walk_and_emit(PyObject *args, int copy, const char *name) {
    Py_buffer in;
    Py_ssize_t off, limit;
    long long first_id, last_id = LLONG_MAX, base = 0, learn_next = LLONG_MAX, learn_interval = 0;
    PyObject *learned = NULL, *a = NULL, *b = NULL;
    if (!PyArg_ParseTuple(args, "y*nnL|LLLLO!", &in, &off, &limit, &first_id, &last_id, &base,
                          &learn_next, &learn_interval, &PyList_Type, &learned)) {
        return NULL;
    }
    if (off < 0 || limit > in.len || off > limit) {
        PyErr_Format(PyExc_ValueError, "%s: off/limit outside the buffer", name);
        goto fail;
    }
    const unsigned char *p = (const unsigned char *)in.buf;
    Py_ssize_t pos, count;
    long long total;
    if (walk_entries(p, off, limit, first_id, last_id, base, &learn_next, learn_interval, learned,
                     &count, &total, &pos) < 0) {
        goto fail;
    }
    if (copy && total > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s: over 2 GiB of payload", name);
        goto fail;
    }
    a = PyBytes_FromStringAndSize(NULL, copy ? (Py_ssize_t)total : count * 8);
    b = PyBytes_FromStringAndSize(NULL, copy ? (count + 1) * 4 : count * 8);
    if (a == NULL || b == NULL) goto fail;
    Py_ssize_t at = off;
    if (copy) {
        unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(a);
        int32_t *ends = (int32_t *)PyBytes_AS_STRING(b);
        Py_BEGIN_ALLOW_THREADS
        int32_t filled = 0;
        ends[0] = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            uint32_t length = get_be32(p + at);
            memcpy(dst + filled, p + at + ENTRY_HEADER_LEN, length);
            filled += (int32_t)length;
            ends[i + 1] = filled;
            at += ENTRY_HEADER_LEN + (Py_ssize_t)length;
        }
        Py_END_ALLOW_THREADS
    } else {
        int64_t *starts = (int64_t *)PyBytes_AS_STRING(a), *lengths = (int64_t *)PyBytes_AS_STRING(b);
        for (Py_ssize_t i = 0; i < count; i++) {
            uint32_t length = get_be32(p + at);
            starts[i] = at + ENTRY_HEADER_LEN;
            lengths[i] = length;
            at += ENTRY_HEADER_LEN + (Py_ssize_t)length;
        }
    }
    PyBuffer_Release(&in);
    return Py_BuildValue("(NNnnL)", a, b, count, pos, learn_next);
fail:
    Py_XDECREF(a);
    Py_XDECREF(b);
    PyBuffer_Release(&in);
    return NULL;
}

static PyObject *pack_entries(PyObject *self, PyObject *args) {
    (void)self;
    return walk_and_emit(args, 1, "pack_entries");
}

static PyObject *span_entries(PyObject *self, PyObject *args) {
    (void)self;
    return walk_and_emit(args, 0, "span_entries");
}

static int get_int64s(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=') f++;
    if (view->itemsize != 8 || f[1] != '\0' || strchr("qQlL", f[0]) == NULL) {
        PyErr_Format(PyExc_TypeError, "%s must be an array of 8-byte integers ('q')", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* iter_span_entries: an iterator over span_entries' result, one entry object per step. */
typedef struct {
    PyObject_HEAD
    Py_buffer buf, starts, lengths; /* held until the iterator is exhausted or freed */
    int held;
    Py_ssize_t index, count;
    long long first_id;
    PyTypeObject *entry_type;
    PyObject *recent[2]; /* the last two entries made; recent[slot] is the older one */
    int slot;
} SpanEntryIter;

static void span_iter_release(SpanEntryIter *it) {
    if (it->held) {
        PyBuffer_Release(&it->buf);
        PyBuffer_Release(&it->starts);
        PyBuffer_Release(&it->lengths);
        it->held = 0;
    }
    Py_CLEAR(it->entry_type);
    Py_CLEAR(it->recent[0]);
    Py_CLEAR(it->recent[1]);
}

static void span_iter_dealloc(SpanEntryIter *it) {
    span_iter_release(it);
    Py_TYPE(it)->tp_free((PyObject *)it);
}

/* Without the GIL, a reference count of 1 does not prove an object unshared: no recycling. */
#ifdef Py_GIL_DISABLED
#define RECYCLE_ENTRIES 0
#else
#define RECYCLE_ENTRIES 1
#endif

/* Copy ``len`` bytes from ``src`` into ``payload`` if nothing else holds it and it has that
 * length, resetting its cached hash; returns whether it did. Only on the CPython versions
 * whose bytes object is known to cache its hash in ob_shash (3.10 to 3.13). */
static int recycle_payload(PyObject *payload, const char *src, Py_ssize_t len) {
#if PY_VERSION_HEX < 0x030E0000
    if (len <= 1 || !PyBytes_CheckExact(payload) || Py_REFCNT(payload) != 1 ||
        PyBytes_GET_SIZE(payload) != len) {
        return 0;
    }
    memcpy(PyBytes_AS_STRING(payload), src, (size_t)len);
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    ((PyBytesObject *)payload)->ob_shash = -1; /* the content changed: forget the cached hash */
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
    return 1;
#else
    (void)payload, (void)src, (void)len;
    return 0;
#endif
}

/* Give the entry made two steps ago (the one before a `for` loop's current one) a new id and
 * payload if nothing but this iterator holds it, recycling its payload too when
 * recycle_payload can: an unshared object cannot be observed changing, and reuse saves an
 * allocation and a free per entry (CPython's zip() reuses its result tuple the same way).
 * Returns a new reference, or NULL with nothing changed. */
static PyObject *span_iter_reuse(SpanEntryIter *it, const char *src, Py_ssize_t len, PyObject *id) {
    PyObject *entry = it->recent[it->slot];
    if (!RECYCLE_ENTRIES || entry == NULL || Py_REFCNT(entry) != 1) return NULL;
    PyObject *old = PyTuple_GET_ITEM(entry, 1);
    if (!recycle_payload(old, src, len)) {
        PyObject *payload = PyBytes_FromStringAndSize(src, len);
        if (payload == NULL) return NULL;
        PyTuple_SET_ITEM(entry, 1, payload);
        Py_DECREF(old);
    }
    PyObject *old_id = PyTuple_GET_ITEM(entry, 0);
    PyTuple_SET_ITEM(entry, 0, id);
    Py_DECREF(old_id);
    Py_INCREF(entry);
    return entry;
}

static PyObject *span_iter_next(SpanEntryIter *it) {
    if (it->index >= it->count) {
        span_iter_release(it); /* let the buffer go as soon as the last entry is made */
        return NULL;
    }
    Py_ssize_t i = it->index;
    const int64_t *starts = (const int64_t *)it->starts.buf;
    const int64_t *lengths = (const int64_t *)it->lengths.buf;
    const char *src = (const char *)it->buf.buf + starts[i];
    Py_ssize_t len = (Py_ssize_t)lengths[i];
    PyObject *id = PyLong_FromLongLong(it->first_id + i);
    if (id == NULL) return NULL;
    PyObject *entry = span_iter_reuse(it, src, len, id);
    if (entry == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(id);
            return NULL;
        }
        PyObject *payload = PyBytes_FromStringAndSize(src, len);
        if (payload == NULL) {
            Py_DECREF(id);
            return NULL;
        }
        entry = it->entry_type->tp_alloc(it->entry_type, 2);
        if (entry == NULL) {
            Py_DECREF(payload);
            Py_DECREF(id);
            return NULL;
        }
        PyTuple_SET_ITEM(entry, 0, id);
        PyTuple_SET_ITEM(entry, 1, payload);
        /* an int and a bytes object cannot be part of a cycle: the collector would untrack
         * this tuple at its first pass anyway; untracking it now keeps those passes cheap */
        PyObject_GC_UnTrack(entry);
        Py_INCREF(entry);
        Py_XSETREF(it->recent[it->slot], entry);
    }
    it->slot ^= 1;
    it->index = i + 1;
    return entry;
}

static PyObject *span_iter_length_hint(SpanEntryIter *it, PyObject *unused) {
    (void)unused;
    return PyLong_FromSsize_t(it->count - it->index);
}

static PyMethodDef span_iter_methods[] = {
    {"__length_hint__", (PyCFunction)span_iter_length_hint, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SpanEntryIterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "formats._speedups.SpanEntryIter",
    .tp_basicsize = sizeof(SpanEntryIter),
    .tp_dealloc = (destructor)span_iter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The entries of span_entries' spans, made one at a time (iter_span_entries).",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)span_iter_next,
    .tp_methods = span_iter_methods,
};

static PyObject *iter_span_entries(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *buf_obj, *starts_obj, *lengths_obj;
    PyTypeObject *entry_type;
    long long first_id;
    if (!PyArg_ParseTuple(args, "OOOLO!", &buf_obj, &starts_obj, &lengths_obj, &first_id,
                          &PyType_Type, &entry_type)) {
        return NULL;
    }
    if (!PyType_IsSubtype(entry_type, &PyTuple_Type) ||
        entry_type->tp_basicsize != PyTuple_Type.tp_basicsize ||
        entry_type->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "entry_type must be a plain tuple subclass");
        return NULL;
    }
    SpanEntryIter *it = PyObject_New(SpanEntryIter, &SpanEntryIterType);
    if (it == NULL) return NULL;
    it->held = 0;
    it->index = it->count = 0;
    it->first_id = first_id;
    it->entry_type = NULL;
    it->recent[0] = it->recent[1] = NULL;
    it->slot = 0;
    if (PyObject_GetBuffer(buf_obj, &it->buf, PyBUF_C_CONTIGUOUS) < 0) goto fail;
    if (get_int64s(starts_obj, &it->starts, "starts") < 0) {
        PyBuffer_Release(&it->buf);
        goto fail;
    }
    if (get_int64s(lengths_obj, &it->lengths, "lengths") < 0) {
        PyBuffer_Release(&it->buf);
        PyBuffer_Release(&it->starts);
        goto fail;
    }
    it->held = 1;
    if (it->starts.len != it->lengths.len) {
        PyErr_SetString(PyExc_ValueError, "iter_span_entries: starts and lengths differ in count");
        goto fail;
    }
    Py_ssize_t count = it->starts.len / 8;
    const int64_t *starts = (const int64_t *)it->starts.buf;
    const int64_t *lengths = (const int64_t *)it->lengths.buf;
    int64_t size = (int64_t)it->buf.len;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (starts[i] < 0 || lengths[i] < 0 || starts[i] > size || lengths[i] > size - starts[i]) {
            PyErr_Format(PyExc_ValueError, "iter_span_entries: span %zd lies outside the buffer",
                         i);
            goto fail;
        }
    }
    if (first_id > LLONG_MAX - count) {
        PyErr_SetString(PyExc_OverflowError, "iter_span_entries: entry ids past 2**63 - 1");
        goto fail;
    }
    it->count = count;
    Py_INCREF(entry_type);
    it->entry_type = entry_type;
    return (PyObject *)it;
fail:
    Py_DECREF(it);
    return NULL;
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

/* a bytearray whose bytes are not set (the caller overwrites every one: a part buffer filled
 * by a positioned read): no memset, so a fresh 64 MiB buffer's pages are touched once, by the
 * read that fills them, as with the bytes os.pread returns */
static PyObject *scratch_bytearray(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred()) return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "scratch_bytearray: negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

/* Fault in the whole pages of [p, p + size) for writing in one madvise(MADV_POPULATE_WRITE)
 * (Linux 5.14+): the kernel maps them in one pass instead of one trap per 4 KiB page on the
 * first write (about a fifth less CPU for a fresh 64 MiB buffer here). Anywhere it is not
 * available (another OS, an older kernel: EINVAL) nothing happens and the memset that follows
 * faults the pages in as before; the bytes are the same either way. */
static void populate_pages(char *p, size_t size) {
#if defined(__linux__)
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || size < (size_t)page * 16) return;
    uintptr_t start = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t end = ((uintptr_t)p + size) & ~((uintptr_t)page - 1);
    if (end > start) (void)madvise((void *)start, end - start, OFFLOADER_MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)size;
#endif
}

static PyObject *zeroed_bytearray(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred()) return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "zeroed_bytearray: negative size");
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    char *p = PyByteArray_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    populate_pages(p, (size_t)size);
    memset(p, 0, (size_t)size);
    Py_END_ALLOW_THREADS
    return out;
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

/* --- CRC32C (Castagnoli): _crc32c.h, shared with _pulsar_speedups.c -------------------------
 * crc32c_update(value, p, n, hw) continues the CRC ``value`` of earlier bytes over p[0..n)
 * (the crc32c package's convention); SSE4.2's crc32 instruction when the CPU has it and hw is
 * set, else a slicing-by-8 table. */
#include "_crc32c.h"

static PyObject *crc32c_c(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer in;
    unsigned long long value = 0;
    int software = 0;
    if (!PyArg_ParseTuple(args, "y*|Kp", &in, &value, &software)) return NULL;
    if (value > 0xFFFFFFFFull) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "crc32c_c: value is not a 32-bit CRC");
        return NULL;
    }
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = crc32c_update((uint32_t)value, (const unsigned char *)in.buf, (size_t)in.len, !software);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *crc32c_combine_c(PyObject *self, PyObject *args) {
    (void)self;
    long long a, b, length;
    if (!PyArg_ParseTuple(args, "LLL", &a, &b, &length)) return NULL;
    if (a < 0 || b < 0 || a > 0xFFFFFFFFll || b > 0xFFFFFFFFll) {
        PyErr_SetString(PyExc_ValueError, "crc32c_combine: a CRC is not a 32-bit value");
        return NULL;
    }
    if (length < 0) {
        PyErr_SetString(PyExc_ValueError, "crc32c_combine: a negative length");
        return NULL;
    }
    return PyLong_FromUnsignedLong(crc32c_combine((uint32_t)a, (uint32_t)b, (uint64_t)length));
}

/* --- int64 arrays --------------------------------------------------------------------------
 * An array('q') (or any C-contiguous buffer of 8-byte integers: 'q', 'Q', 'l', 'L'), as
 * int64_t; 'Q' values of 2**63 and above read as negative and fail the callers' bounds
 * checks. */
static PyObject *frame_spans(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out, data, starts, lengths;
    Py_ssize_t pos, index, count, limit;
    long long first_id;
    PyObject *starts_obj, *lengths_obj;
    if (!PyArg_ParseTuple(args, "w*nLy*OOnnn", &out, &pos, &first_id, &data, &starts_obj,
                          &lengths_obj, &index, &count, &limit)) {
        return NULL;
    }
    if (get_int64s(starts_obj, &starts, "starts") < 0) goto release_data;
    if (get_int64s(lengths_obj, &lengths, "lengths") < 0) goto release_starts;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / 8;
    if (lengths.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "frame_spans: starts and lengths differ in length");
    } else if (pos < 0 || limit > out.len || pos > limit) {
        PyErr_SetString(PyExc_ValueError, "frame_spans: pos/limit outside the buffer");
    } else if (index < 0 || count < 0 || index > n || count > n - index) {
        PyErr_SetString(PyExc_ValueError, "frame_spans: index/count outside the spans");
    } else {
        const int64_t *s = (const int64_t *)starts.buf, *l = (const int64_t *)lengths.buf;
        const unsigned char *src = (const unsigned char *)data.buf;
        unsigned char *dst = (unsigned char *)out.buf;
        Py_ssize_t done = 0, bad = -1;
        Py_BEGIN_ALLOW_THREADS
        for (; done < count; done++) {
            int64_t start = s[index + done], size = l[index + done];
            if (start < 0 || size < 0 || start > data.len || size > data.len - start) {
                bad = index + done;
                break;
            }
            if (size > INT32_MAX || ENTRY_HEADER_LEN + size > limit - pos) break;
            put_be32(dst + pos, (uint32_t)size);
            put_be64(dst + pos + 4, (uint64_t)(first_id + done));
            memcpy(dst + pos + ENTRY_HEADER_LEN, src + start, (size_t)size);
            pos += ENTRY_HEADER_LEN + (Py_ssize_t)size;
        }
        Py_END_ALLOW_THREADS
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError, "frame_spans: span %zd is outside the data", bad);
        } else {
            result = Py_BuildValue("nn", pos, done);
        }
    }
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
release_starts:
    PyBuffer_Release(&starts);
release_data:
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return NULL;
}

#define RECORD_HEADER_LEN 8
enum { RECORD_OK = 0, RECORD_HEADER, RECORD_LENGTH, RECORD_CRC };

static PyObject *record_spans(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf, offsets;
    PyObject *offsets_obj;
    long long base, end;
    if (!PyArg_ParseTuple(args, "y*OLL", &buf, &offsets_obj, &base, &end)) return NULL;
    if (get_int64s(offsets_obj, &offsets, "offsets") < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    Py_ssize_t n = offsets.len / 8;
    PyObject *starts = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *lengths = PyBytes_FromStringAndSize(NULL, n * 8);
    if (starts == NULL || lengths == NULL) goto fail;
    const int64_t *off = (const int64_t *)offsets.buf;
    int64_t *s = (int64_t *)PyBytes_AS_STRING(starts), *l = (int64_t *)PyBytes_AS_STRING(lengths);
    const unsigned char *p = (const unsigned char *)buf.buf;
    const int64_t len = (int64_t)buf.len;
    Py_ssize_t i = 0;
    int reason = RECORD_OK;
    Py_BEGIN_ALLOW_THREADS
    for (; i < n; i++) {
        int64_t at = off[i], next = i + 1 < n ? off[i + 1] : end;
        if (base < 0 || at < base || at - base > len - RECORD_HEADER_LEN) {
            reason = RECORD_HEADER;
            break;
        }
        int64_t rel = at - base;
        uint32_t length = get_be32(p + rel);
        /* the record must end where the next begins, inside the buffer */
        if (next < base || next - base > len || (int64_t)length != next - at - RECORD_HEADER_LEN) {
            reason = RECORD_LENGTH;
            break;
        }
        uint32_t crc = crc32c_update(crc32c_update(0, p + rel, 4, 1), p + rel + RECORD_HEADER_LEN,
                                     length, 1);
        if (crc != get_be32(p + rel + 4)) {
            reason = RECORD_CRC;
            break;
        }
        s[i] = rel + RECORD_HEADER_LEN;
        l[i] = length;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&buf);
    if (reason != RECORD_OK &&
        (_PyBytes_Resize(&starts, i * 8) < 0 || _PyBytes_Resize(&lengths, i * 8) < 0)) {
        Py_XDECREF(starts);
        Py_XDECREF(lengths);
        return NULL;
    }
    static const char *const reasons[] = {NULL, "header", "length", "crc"};
    return Py_BuildValue("(NNnz)", starts, lengths, reason == RECORD_OK ? (Py_ssize_t)-1 : i,
                         reasons[reason]);
fail:
    Py_XDECREF(starts);
    Py_XDECREF(lengths);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&buf);
    return NULL;
}

static PyMethodDef methods[] = {
    {"frame_entries", frame_entries, METH_VARARGS,
     "frame_entries(buf, pos, first_entry_id, payloads, limit) -> (pos, count)"},
    {"pack_entries", pack_entries, METH_VARARGS,
     "pack_entries(buf, off, limit, first_id[, last_id, base, learn_next, learn_interval, "
     "learned]) -> (data, offsets, count, stop, learn_next)"},
    {"span_entries", span_entries, METH_VARARGS,
     "span_entries(buf, off, limit, first_id[, last_id, base, learn_next, learn_interval, "
     "learned]) -> (starts, lengths, count, stop, learn_next)"},
    {"iter_span_entries", iter_span_entries, METH_VARARGS,
     "iter_span_entries(buf, starts, lengths, first_id, entry_type) -> iterator of "
     "entry_type(id, payload bytes), made one at a time"},
    {"pack_into", pack_into, METH_VARARGS,
     "pack_into(out, out_pos, offsets, index, buf, off, limit, first_id) -> (out_pos, count, "
     "stop)"},
    {"scratch_bytearray", scratch_bytearray, METH_O,
     "scratch_bytearray(size) -> bytearray of size bytes whose contents are not set (the "
     "caller overwrites them all)"},
    {"zeroed_bytearray", zeroed_bytearray, METH_O,
     "zeroed_bytearray(size) -> bytearray of size zero bytes, zeroed without the GIL"},
    {"framed_prefix", framed_prefix, METH_O,
     "framed_prefix(lengths) -> (prefix int64 bytes, smallest, largest)"},
    {"frame_spans", frame_spans, METH_VARARGS,
     "frame_spans(buf, pos, first_entry_id, data, starts, lengths, index, count, limit) -> "
     "(pos, count)"},
    {"record_spans", record_spans, METH_VARARGS,
     "record_spans(buf, offsets, base, end) -> (starts, lengths, bad, reason)"},
    {"crc32c_c", crc32c_c, METH_VARARGS,
     "crc32c_c(data, value=0, software=False) -> CRC32C of data continuing from value "
     "(for the tests; software=True forces the table-driven loop)"},
    {"crc32c_combine", crc32c_combine_c, METH_VARARGS,
     "crc32c_combine(crc_a, crc_b, length_b) -> CRC32C of A + B"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "formats._speedups",
    "C versions of the per-entry loops of formats.framing (see formats/_speedups.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    crc32c_init();
    if (PyType_Ready(&SpanEntryIterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "CRC32C_HARDWARE", crc_hw) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
