/* The C twin of formats/pulsar/managed_ledger_info.py's binary decoder (included by
 * _pulsar_speedups.c, which defines Cur, rd_varint and skip_field).
 *
 * managed_ledger_info_values(buf) takes a plain (uncompressed) binary ManagedLedgerInfo and
 * returns (ledgers, terminated, properties) as tuples of plain values:
 *   ledger  = (ledgerId, entries, size, timestamp, context | None, properties)
 *   context = (uidMsb, uidLsb, complete, bookkeeperDeleted, timestamp, driver bytes | None,
 *              segments)
 *   segment = (uidMsb, uidLsb, complete, assignedTimestamp, offloadedTimestamp, endEntryId,
 *              driver bytes | None)
 * (absent optional integers are None; a driver's bytes are decoded, and cached, by the Python
 * twin). Anything it is not sure of (a wrong wire type, a missing required field, bad UTF-8, a
 * truncated field) raises ValueError: the caller then runs the pure-Python twin, which gives
 * the typed error with its offset. The results are equal to the twin's (tests/formats). */

#define ML_NONE_I (-1)

static PyObject *ml_fail(const char *what) {
    PyErr_Format(PyExc_ValueError, "ManagedLedgerInfo: %s", what);
    return NULL;
}

/* the tag at the cursor: field number and wire type; -1 at a bad tag */
static int ml_tag(Cur *c, Py_ssize_t end, uint64_t *number, int *wire) {
    uint64_t key;
    if (rd_varint(c, end, &key)) return -1;
    *number = key >> 3;
    *wire = (int)(key & 7);
    if (*number == 0) return -1;
    return 0;
}

/* a length-delimited value: [*at, *at + *len) */
static int ml_bytes(Cur *c, Py_ssize_t end, Py_ssize_t *at, Py_ssize_t *len) {
    uint64_t v;
    if (rd_varint(c, end, &v) || v > (uint64_t)(end - c->pos)) return -1;
    *at = c->pos;
    *len = (Py_ssize_t)v;
    c->pos += *len;
    return 0;
}

static PyObject *ml_i64(uint64_t v) { return PyLong_FromLongLong((long long)(int64_t)v); }

static PyObject *ml_opt(int have, uint64_t v) {
    if (!have) return Py_NewRef(Py_None);
    return ml_i64(v);
}

/* KeyValue {key 1, value 2}, both required, UTF-8 */
static PyObject *ml_key_value(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end) {
    Cur c = {p, pos, end};
    Py_ssize_t kat = -1, klen = 0, vat = -1, vlen = 0;
    while (c.pos < end) {
        uint64_t n; int w;
        if (ml_tag(&c, end, &n, &w)) return ml_fail("bad tag");
        if (n == 1 || n == 2) {
            if (w != 2) return ml_fail("key/value not length-delimited");
            Py_ssize_t at, len;
            if (ml_bytes(&c, end, &at, &len)) return ml_fail("truncated");
            if (n == 1) { kat = at; klen = len; } else { vat = at; vlen = len; }
        } else if (skip_field(&c, end, w)) {
            return ml_fail("bad field");
        }
    }
    if (kat < 0 || vat < 0) return ml_fail("key/value missing");
    PyObject *k = PyUnicode_DecodeUTF8((const char *)p + kat, klen, NULL);
    if (k == NULL) return NULL;
    PyObject *v = PyUnicode_DecodeUTF8((const char *)p + vat, vlen, NULL);
    if (v == NULL) { Py_DECREF(k); return NULL; }
    PyObject *t = PyTuple_Pack(2, k, v);
    Py_DECREF(k);
    Py_DECREF(v);
    return t;
}

/* append one KeyValue to *list (created on first use) */
static int ml_append_kv(PyObject **list, const unsigned char *p, Py_ssize_t at, Py_ssize_t len) {
    PyObject *kv = ml_key_value(p, at, at + len);
    if (kv == NULL) return -1;
    if (*list == NULL && (*list = PyList_New(0)) == NULL) { Py_DECREF(kv); return -1; }
    int r = PyList_Append(*list, kv);
    Py_DECREF(kv);
    return r;
}

/* a list (or NULL) as a tuple (an empty one for NULL); steals the list */
static PyObject *ml_tuple(PyObject *list) {
    if (list == NULL) return PyTuple_New(0);
    PyObject *t = PyList_AsTuple(list);
    Py_DECREF(list);
    return t;
}

/* OffloadContext (segment == 0) or OffloadSegment (segment == 1): both are seven values */
static PyObject *ml_context(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, int segment) {
    Cur c = {p, pos, end};
    /* context: 1 msb, 2 lsb, 3 complete, 4 bkDeleted, 5 timestamp, 6 driver, 7 segment
     * segment: 1 msb, 2 lsb, 3 complete, 4 assigned, 5 offloaded, 6 endEntryId, 7 driver */
    uint64_t val[6] = {0, 0, 0, 0, 0, 0};
    int have[6] = {0, 0, 0, 0, 0, 0};
    Py_ssize_t dat = -1, dlen = 0;
    PyObject *segments = NULL;
    int driver_field = segment ? 7 : 6;
    while (c.pos < end) {
        uint64_t n; int w;
        if (ml_tag(&c, end, &n, &w)) goto bad;
        if (n >= 1 && n <= 7 && (int)n != driver_field && !(n == 7 && !segment)) {
            if (w != 0) goto bad;
            if (rd_varint(&c, end, &val[n - 1])) goto bad;
            have[n - 1] = 1;
        } else if ((int)n == driver_field) {
            /* a repeated driver: the twin decodes each (and may refuse an earlier one) */
            if (dat >= 0 || w != 2 || ml_bytes(&c, end, &dat, &dlen)) goto bad;
        } else if (n == 7 && !segment) {
            Py_ssize_t at, len;
            if (w != 2 || ml_bytes(&c, end, &at, &len)) goto bad;
            PyObject *s = ml_context(p, at, at + len, 1);
            if (s == NULL) goto error;
            if (segments == NULL && (segments = PyList_New(0)) == NULL) { Py_DECREF(s); goto error; }
            int r = PyList_Append(segments, s);
            Py_DECREF(s);
            if (r) goto error;
        } else if (skip_field(&c, end, w)) {
            goto bad;
        }
    }
    PyObject *out = PyTuple_New(7);
    if (out == NULL) goto error;
    PyTuple_SET_ITEM(out, 0, ml_opt(have[0], val[0]));
    PyTuple_SET_ITEM(out, 1, ml_opt(have[1], val[1]));
    PyTuple_SET_ITEM(out, 2, PyBool_FromLong(val[2] != 0));
    if (segment) {
        PyTuple_SET_ITEM(out, 3, ml_opt(have[3], val[3]));
        PyTuple_SET_ITEM(out, 4, ml_opt(have[4], val[4]));
        PyTuple_SET_ITEM(out, 5, ml_opt(have[5], val[5]));
    } else {
        PyTuple_SET_ITEM(out, 3, PyBool_FromLong(val[3] != 0));
        PyTuple_SET_ITEM(out, 4, ml_opt(have[4], val[4]));
        PyTuple_SET_ITEM(out, 5, dat < 0 ? Py_NewRef(Py_None)
                                         : PyBytes_FromStringAndSize((const char *)p + dat, dlen));
    }
    if (segment) {
        PyTuple_SET_ITEM(out, 6, dat < 0 ? Py_NewRef(Py_None)
                                         : PyBytes_FromStringAndSize((const char *)p + dat, dlen));
    } else {
        PyTuple_SET_ITEM(out, 6, ml_tuple(segments));
        segments = NULL;
    }
    for (int i = 0; i < 7; i++) {
        if (PyTuple_GET_ITEM(out, i) == NULL) { Py_DECREF(out); return NULL; }
    }
    return out;
bad:
    Py_XDECREF(segments);
    return ml_fail(segment ? "bad OffloadSegment" : "bad OffloadContext");
error:
    Py_XDECREF(segments);
    return NULL;
}

static PyObject *ml_ledger(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end) {
    Cur c = {p, pos, end};
    uint64_t val[4] = {0, 0, 0, 0};
    int have[4] = {0, 0, 0, 0};
    Py_ssize_t cat = -1, clen = 0;
    PyObject *props = NULL;
    while (c.pos < end) {
        uint64_t n; int w;
        if (ml_tag(&c, end, &n, &w)) goto bad;
        if (n >= 1 && n <= 4) {
            if (w != 0 || rd_varint(&c, end, &val[n - 1])) goto bad;
            have[n - 1] = 1;
        } else if (n == 5) {
            /* a repeated offloadContext: the twin decodes each, the last wins */
            if (cat >= 0 || w != 2 || ml_bytes(&c, end, &cat, &clen)) goto bad;
        } else if (n == 6) {
            Py_ssize_t at, len;
            if (w != 2 || ml_bytes(&c, end, &at, &len)) goto bad;
            if (ml_append_kv(&props, p, at, len)) goto error;
        } else if (skip_field(&c, end, w)) {
            goto bad;
        }
    }
    if (!have[0]) goto bad;
    PyObject *context;
    if (cat < 0) {
        context = Py_NewRef(Py_None);
    } else {
        context = ml_context(p, cat, cat + clen, 0);
        if (context == NULL) goto error;
    }
    PyObject *ptuple = ml_tuple(props);
    props = NULL;
    if (ptuple == NULL) { Py_DECREF(context); return NULL; }
    PyObject *out = PyTuple_New(6);
    if (out == NULL) { Py_DECREF(context); Py_DECREF(ptuple); return NULL; }
    PyTuple_SET_ITEM(out, 0, ml_i64(val[0]));
    PyTuple_SET_ITEM(out, 1, ml_opt(have[1], val[1]));
    PyTuple_SET_ITEM(out, 2, ml_opt(have[2], val[2]));
    PyTuple_SET_ITEM(out, 3, ml_opt(have[3], val[3]));
    PyTuple_SET_ITEM(out, 4, context);
    PyTuple_SET_ITEM(out, 5, ptuple);
    for (int i = 0; i < 4; i++) {
        if (PyTuple_GET_ITEM(out, i) == NULL) { Py_DECREF(out); return NULL; }
    }
    return out;
bad:
    Py_XDECREF(props);
    return ml_fail("bad LedgerInfo");
error:
    Py_XDECREF(props);
    return NULL;
}

static PyObject *managed_ledger_info_values(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    const unsigned char *p = (const unsigned char *)buf.buf;
    Py_ssize_t end = buf.len;
    Cur c = {p, 0, end};
    PyObject *ledgers = PyList_New(0), *props = NULL, *terminated = NULL, *result = NULL;
    if (ledgers == NULL) goto done;
    while (c.pos < end) {
        uint64_t n; int w;
        if (ml_tag(&c, end, &n, &w)) { ml_fail("bad tag"); goto done; }
        if (n == 1 || n == 2 || n == 3) {
            Py_ssize_t at, len;
            if (w != 2 || ml_bytes(&c, end, &at, &len)) { ml_fail("bad field"); goto done; }
            if (n == 1) {
                PyObject *li = ml_ledger(p, at, at + len);
                if (li == NULL) goto done;
                int r = PyList_Append(ledgers, li);
                Py_DECREF(li);
                if (r) goto done;
            } else if (n == 2) {
                Cur t = {p, at, at + len};
                uint64_t lid = 0, eid = 0;
                int hl = 0, he = 0;
                while (t.pos < at + len) {
                    uint64_t tn; int tw;
                    if (ml_tag(&t, at + len, &tn, &tw)) { ml_fail("bad tag"); goto done; }
                    if (tn == 1 || tn == 2) {
                        uint64_t v;
                        if (tw != 0 || rd_varint(&t, at + len, &v)) {
                            ml_fail("bad terminatedPosition");
                            goto done;
                        }
                        if (tn == 1) { lid = v; hl = 1; } else { eid = v; he = 1; }
                    } else if (skip_field(&t, at + len, tw)) {
                        ml_fail("bad terminatedPosition");
                        goto done;
                    }
                }
                if (!hl || !he) { ml_fail("terminatedPosition incomplete"); goto done; }
                PyObject *a = ml_i64(lid), *b = ml_i64(eid);
                Py_XSETREF(terminated, (a && b) ? PyTuple_Pack(2, a, b) : NULL);
                Py_XDECREF(a);
                Py_XDECREF(b);
                if (terminated == NULL) goto done;
            } else if (ml_append_kv(&props, p, at, len)) {
                goto done;
            }
        } else if (skip_field(&c, end, w)) {
            ml_fail("bad field");
            goto done;
        }
    }
    {
        PyObject *lt = PyList_AsTuple(ledgers);
        if (lt == NULL) goto done;
        PyObject *pt = ml_tuple(props);
        props = NULL;
        if (pt == NULL) { Py_DECREF(lt); goto done; }
        result = PyTuple_Pack(3, lt, terminated ? terminated : Py_None, pt);
        Py_DECREF(lt);
        Py_DECREF(pt);
    }
done:
    Py_XDECREF(ledgers);
    Py_XDECREF(props);
    Py_XDECREF(terminated);
    PyBuffer_Release(&buf);
    return result;
}
