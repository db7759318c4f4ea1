/* The block walk of _pulsar_speedups.c (included by it, after the split and the
 * MessageMetadata table it uses): decode_entries_into, message_ids_into and crc32c.
 */
#ifndef PULSAR_BLOCK_H
#define PULSAR_BLOCK_H

/* --- decode_entries_into: a run of a block's entries straight into a worker's columns -----
 * decode_entries_into(data, offsets, start, stop, first_entry_id, ledger_id, partition,
 *                     max_rows, max_bytes, first_entries, cols, producers, versions[, decompress])
 *   -> (next, rows)
 * data and offsets: a packed block (formats.block.PackedEntries: entry first_entry_id + i is
 * data[offsets[i]:offsets[i + 1]], offsets native int32). Entries start, start + 1, ... are
 * checked (CRC32C when the entry has one, BrokerEntryMetadata and MessageMetadata as their
 * decoders check them) and split into the rows of cols, a tuple of 26 bytearrays: the 8 of
 * split_batch_into, then ledger_id (int64), entry_id (int64), publish_time (int64 microseconds;
 * an entry whose time is past Spark's range is left to the Python path), run (int32: the row's index in producers / versions, to which a producer name
 * (str) and a schema version (bytes|None) are appended when they differ from the previous
 * entry's of this call), encrypted (int8, 0), message_id offsets (int32) and bytes
 * ("ledger:entry:partition:index"), first entry id (int64; only with first_entries), then the
 * 10 of ordering_key, properties and event_time (_pulsar_rich.h: untouched while no row has one).
 * decompress (optional; None: compressed entries are left to the Python path): the Python
 * decompress(codec, data, uncompressed_size) that a compressed batch's payload goes through
 * (a memoryview on data, released after the call), its bytes then split as an uncompressed
 * batch's; when it raises, the entry is left to the Python path, which raises it again.
 * It stops before the first entry it leaves to the Python path (anything but an unencrypted
 * batch (uncompressed, or compressed with decompress given) or uncompressed single message
 * that is no chunk and no marker, or any malformed input: the Python path raises the typed
 * error), with nothing of that entry appended, or after the entry that takes
 * the rows added to max_rows or the value bytes (cols[4]) to max_bytes. next: the index of the
 * first entry not taken. */
#define BLOCK_COLS 16

typedef struct {
    Py_ssize_t prod_at, prod_len, sv_at, sv_len;
    uint64_t seq, publish, usize;  /* usize: uncompressed_size (0 when unset) */
    int64_t count;
    int codec;
    int have, batch, special;  /* have: bit 1 producer, 2 sequence id, 4 publish time */
    /* what a single (not batched) message's row takes from its MessageMetadata */
    Py_ssize_t key_at, key_len, ord_at, ord_len, nprops;
    Py_ssize_t prop_at[MAX_PROPS], prop_len[MAX_PROPS];
    uint64_t event;
    int null_key, null_value;
} EntryMd;

/* a KeyValue of MessageMetadata as key_value(strict) accepts it, without making objects */
static int kv_ok(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end) {
    KvSpan s;
    return kv_span(p, pos, end, 1, &s);
}

/* MessageMetadata in p[pos, end), checked as message_metadata_values checks it; 0 or 1 */
static int entry_md(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, EntryMd *m) {
    Cur c = {p, pos, end};
    memset(m, 0, sizeof *m);
    m->sv_at = -1; m->key_at = -1; m->ord_at = -1;
    while (c.pos < end) {
        uint64_t tag, v = 0;
        Py_ssize_t at = 0, len = 0;
        if (rd_varint(&c, end, &tag)) return 1;
        int wire = (int)(tag & 7);
        uint64_t field = tag >> 3;
        if (field == 0) return 1;
        int kind = field <= MD_MAX_FIELD ? MD_FIELDS[field].kind : K_NONE;
        if (kind == K_NONE) {
            if (skip_field(&c, end, wire)) return 1;
            continue;
        }
        int delimited = kind >= K_STR;
        if (wire != (delimited ? 2 : 0) || rd_varint(&c, end, &v)) return 1;
        if (delimited) {
            if (v > (uint64_t)(end - c.pos)) return 1;
            at = c.pos; len = (Py_ssize_t)v;
            c.pos += len;
        }
        if (kind == K_ENC) return 1;
        if ((kind == K_STR || kind == K_STRS) && !utf8_ok(p + at, len)) return 1;
        if (kind == K_KV && !kv_ok(p, at, at + len)) return 1;
        if (kind == K_I32 && ((int64_t)v < INT32_MIN || (int64_t)v > INT32_MAX)) return 1;
        switch (field) {
        case 1: m->prod_at = at; m->prod_len = len; m->have |= 1; break;
        case 2: m->seq = v; m->have |= 2; break;
        case 3: m->publish = v; m->have |= 4; break;
        case 8: m->codec = (int)(int32_t)(int64_t)v; break;  /* compressed */
        case 9: m->usize = v; break;
        case 11: m->count = (int32_t)(int64_t)v; m->batch = 1; break;
        case 16: m->sv_at = at; m->sv_len = len; break;
        case 4:
            if (m->nprops == MAX_PROPS) return 1;
            m->prop_at[m->nprops] = at; m->prop_len[m->nprops] = len; m->nprops++;
            break;
        case 6: m->key_at = at; m->key_len = len; break;
        case 12: m->event = v; break;
        case 18: m->ord_at = at; m->ord_len = len; break;
        case 25: m->null_value = v != 0; break;
        case 30: m->null_key = v != 0; break;
        case 20: case 26: case 27: m->special = 1; break;   /* a marker, maybe a chunk */
        }
    }
    return m->have != 7;
}

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* one entry p[at, end): checksum and BrokerEntryMetadata checked, MessageMetadata read;
 * *payload where the payload starts. 0, or 1 when it is left to the Python path */
static int entry_head(const unsigned char *p, Py_ssize_t at, Py_ssize_t end, EntryMd *m,
                      Py_ssize_t *payload) {
    Py_ssize_t pos = at;
    if (end - pos >= 2 && p[pos] == 0x0e && p[pos + 1] == 0x02) {
        if (end - pos < 6) return 1;
        int32_t size = (int32_t)be32(p + pos + 2);
        if (size < 0 || size > end - pos - 6) return 1;
        Py_ssize_t stop = pos + 6 + size;
        Cur c = {p, pos + 6, stop};
        while (c.pos < stop) {  /* fields 1 and 2 are varints; others skipped */
            uint64_t tag;
            if (rd_varint(&c, stop, &tag) || (tag >> 3) == 0) return 1;
            int wire = (int)(tag & 7);
            if (((tag >> 3) == 1 || (tag >> 3) == 2) && wire != 0) return 1;
            if (skip_field(&c, stop, wire)) return 1;
        }
        pos = stop;
    }
    if (end - pos >= 2 && p[pos] == 0x0e && p[pos + 1] == 0x01) {
        if (end - pos < 6) return 1;
        uint32_t stored = be32(p + pos + 2);
        pos += 6;
        if (crc32c_update(0, p + pos, (size_t)(end - pos), 1) != stored) return 1;
    }
    if (end - pos < 4) return 1;
    int32_t size = (int32_t)be32(p + pos);
    if (size < 0 || size > end - pos - 4) return 1;
    if (entry_md(p, pos + 4, pos + 4 + size, m)) return 1;
    *payload = pos + 4 + size;
    return 0;
}

static int fmt_i64(char *out, int64_t v) {
    char tmp[24];
    int n = 0, len = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do { tmp[n++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

static void fill_i64(char *w, int64_t v, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) memcpy(w + 8 * i, &v, 8);
}

/* the rows' columns besides the split's (rows_fit and the id offsets checked); 0 or 2.
 * caps.rows: the rows the buffers are expected to hold (grow_to's cap) */
static int write_entry_cols(PyObject **ba, const Row *rows, Py_ssize_t n, int64_t ledger,
                            int64_t entry, int64_t publish, int32_t run, const char *prefix,
                            int plen, Py_ssize_t id_bytes, int first_entries, Caps caps) {
    char *w;
    Py_ssize_t more = caps.rows - PyByteArray_GET_SIZE(ba[12]);  /* ba[12]: a byte per row */
    if (more < n) more = n;
    if ((w = grow_to(ba[8], 8 * n, 8 * caps.rows)) == NULL) return 2;
    fill_i64(w, ledger, n);
    if ((w = grow_to(ba[9], 8 * n, 8 * caps.rows)) == NULL) return 2;
    fill_i64(w, entry, n);
    if ((w = grow_to(ba[10], 8 * n, 8 * caps.rows)) == NULL) return 2;
    fill_i64(w, publish, n);
    if ((w = grow_to(ba[11], 4 * n, 4 * caps.rows)) == NULL) return 2;
    for (Py_ssize_t i = 0; i < n; i++) memcpy(w + 4 * i, &run, 4);
    if ((w = grow_to(ba[12], n, caps.rows)) == NULL) return 2;
    memset(w, 0, (size_t)n);
    int32_t off = last_i32(ba[13]);
    char *o = grow_to(ba[13], 4 * n, 4 * (caps.rows + 1));
    Py_ssize_t id_cap = PyByteArray_GET_SIZE(ba[14]) + more * (id_bytes / n + 1);
    if (o == NULL || (w = grow_to(ba[14], id_bytes, id_cap)) == NULL) return 2;
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(w, prefix, (size_t)plen);
        int len = plen + fmt_i64(w + plen, rows[i].index);
        w += len; off += len;
        memcpy(o + 4 * i, &off, 4);
    }
    if (first_entries) {
        if ((w = grow_to(ba[15], 8 * n, 8 * caps.rows)) == NULL) return 2;
        fill_i64(w, entry, n);
    }
    return 0;
}

/* the length of v in decimal (a minus sign included) */
static int digits(Py_ssize_t v) {
    int d = 1;
    if (v < 0) { d++; v = -v; }
    while (v >= 10) { v /= 10; d++; }
    return d;
}

/* the one row of a single (not batched) message: as split_rows, from the entry's
 * MessageMetadata (strict properties, already checked by kv_ok) and its whole payload
 * p[payload, end) */
static int single_row(const unsigned char *p, const EntryMd *m, Py_ssize_t payload,
                      Py_ssize_t end, Row *r, Rich *rich, Py_ssize_t *tv, Py_ssize_t *tk) {
    if (m->seq > (uint64_t)INT64_MAX) return 1;  /* NULL in the column: the Python path */
    if (rich_begin(rich, 1)) return 2;
    if (m->nprops) {
        int bad = rich_props(rich, p, m->prop_at, m->prop_len, m->nprops, 1);
        if (bad) return bad;
    }
    rich_row(rich, m->event, m->ord_at, m->ord_len, m->nprops);
    r->index = -1;
    r->seq = (int64_t)m->seq;
    r->is_null = m->null_value;
    r->value_at = payload;
    r->value_len = m->null_value ? 0 : end - payload;
    r->key_at = m->null_key ? -1 : m->key_at;
    r->key_len = r->key_at < 0 ? 0 : m->key_len;
    *tv = r->value_len;
    *tk = r->key_len;
    return 0;
}

/* a compressed batch's payload at[0, len) through the Python decompress(codec, data,
 * uncompressed_size) given to decode_entries_into: bytes, or NULL. NULL with *failed 0: the
 * entry is left to the Python path (the error, cleared, is raised there again, located; so
 * is an answer other than bytes); with *failed 2: an error that is not an Exception
 * (KeyboardInterrupt, ...), kept. The view on the block is released before returning. */
static PyObject *inflate(PyObject *fn, int codec, const unsigned char *at, Py_ssize_t len,
                         uint64_t usize, int *failed) {
    PyObject *view = PyMemoryView_FromMemory((char *)at, len, PyBUF_READ);
    if (view == NULL) { *failed = 2; return NULL; }
    PyObject *out = PyObject_CallFunction(fn, "iOK", codec, view, (unsigned long long)usize);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);  /* the call's error, if any, kept across the release */
    PyObject *gone = PyObject_CallMethod(view, "release", NULL);
    Py_DECREF(view);
    if (gone == NULL) {  /* the view is still in use: an error of its own (BufferError) */
        Py_XDECREF(out); Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
        *failed = 2;
        return NULL;
    }
    Py_DECREF(gone);
    PyErr_Restore(type, value, tb);
    if (out != NULL && !PyBytes_CheckExact(out)) Py_CLEAR(out);
    if (out == NULL && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
        else *failed = 2;
    }
    return out;
}

static PyObject *decode_entries_into(PyObject *self, PyObject *args) {
    Py_buffer data, offs;
    Py_ssize_t start, stop, max_rows, max_bytes;
    long long first_id, ledger, partition;
    int first_entries;
    PyObject *cols, *producers, *versions, *decompress = Py_None;
    if (!PyArg_ParseTuple(args, "y*y*nnLLLnnpO!O!O!|O", &data, &offs, &start, &stop, &first_id,
                          &ledger, &partition, &max_rows, &max_bytes, &first_entries,
                          &PyTuple_Type, &cols, &PyList_Type, &producers, &PyList_Type, &versions,
                          &decompress))
        return NULL;
    PyObject *result = NULL, *plain = NULL;  /* plain: a compressed batch, decompressed */
    Rich rich = {0};
    Row *rows = NULL;
    Py_ssize_t cap = 0, added = 0, next = start;
    int failed = 0;  /* 2: a Python error */
    if (check_cols(cols, BLOCK_COLS + RICH_COLS, 3, 5, "decode_entries_into") ||
        check_cols(cols, BLOCK_COLS + RICH_COLS, 13, 13, "decode_entries_into") ||
        check_rich(cols, BLOCK_COLS, "decode_entries_into")) { failed = 2; goto done; }
    if (offs.len % 4 || start < 0 || start > stop || stop > offs.len / 4 - 1) {
        PyErr_SetString(PyExc_ValueError, "decode_entries_into: entries outside the offsets");
        failed = 2; goto done;
    }
    PyObject **ba = &PyTuple_GET_ITEM(cols, 0), **rb = ba + BLOCK_COLS;
    const unsigned char *base = (const unsigned char *)data.buf;
    const char *off = (const char *)offs.buf;  /* native int32s, maybe unaligned */
    const unsigned char *last_prod = NULL, *last_sv = NULL;
    Py_ssize_t last_prod_len = -1, last_sv_len = -1;
    int32_t run = -1;
    /* what the call's buffers are expected to hold at most (a bound on their growth) */
    const Py_ssize_t hint_max = (Py_ssize_t)1 << 28;
    Caps caps = {PyByteArray_GET_SIZE(ba[2]) + (max_rows < hint_max ? max_rows : hint_max),
                 max_bytes < hint_max ? max_bytes : hint_max};
    if (caps.rows < 0) caps.rows = 0;
    if (caps.values < 0) caps.values = 0;
    for (Py_ssize_t i = start; i < stop; i++) {
        next = i;
        int32_t a, b;
        memcpy(&a, off + 4 * i, 4);
        memcpy(&b, off + 4 * (i + 1), 4);
        if (a < 0 || a > b || b > data.len) break;
        const unsigned char *p = base;  /* positions are from the start of data */
        Py_ssize_t end = b, payload;
        EntryMd m;
        if (entry_head(p, a, end, &m, &payload) || m.special || m.publish > MAX_SPARK_MS) break;
        /* the rows' values and keys: q[qpos, qend), the payload or a batch decompressed */
        const unsigned char *q = p;
        Py_ssize_t qpos = payload, qend = end;
        Py_CLEAR(plain);
        if (m.codec != 0) {
            if (decompress == Py_None || !m.batch) break;
            plain = inflate(decompress, m.codec, p + payload, end - payload, m.usize, &failed);
            if (failed) goto done;
            if (plain == NULL) break;
            q = (const unsigned char *)PyBytes_AS_STRING(plain);
            qpos = 0;
            qend = PyBytes_GET_SIZE(plain);
        }
        if (m.batch && (m.count < 0 || m.count > (qend - qpos) / 4 + 1)) break;
        if (!m.batch) m.count = 1;  /* a single message: one row */
        if (m.count > cap) {
            cap = m.count > 2 * cap ? m.count : 2 * cap;
            Row *grown = PyMem_Realloc(rows, sizeof(Row) * (size_t)cap);
            if (grown == NULL) { PyErr_NoMemory(); failed = 2; goto done; }
            rows = grown;
        }
        Py_ssize_t n = 0, tv = 0, tk = 0;
        int r = m.batch ? split_rows(q, qpos, qend, m.count, m.seq, rows, &rich, &n, &tv, &tk)
                        : single_row(p, &m, payload, end, rows, &rich, &tv, &tk);
        if (!m.batch && r == 0) n = 1;
        if (r == 2) { failed = 2; goto done; }
        int64_t entry = first_id + i;
        char prefix[80];
        int plen = fmt_i64(prefix, ledger);
        prefix[plen++] = ':';
        plen += fmt_i64(prefix + plen, entry);
        prefix[plen++] = ':';
        plen += fmt_i64(prefix + plen, partition);
        prefix[plen++] = ':';
        Py_ssize_t id_bytes = 0;
        for (Py_ssize_t k = 0; k < n; k++) id_bytes += plen + digits(rows[k].index);
        if (r == 1 || !rows_fit(ba, tv, tk) || !rich_fits(&rich, rb) ||
            (int64_t)last_i32(ba[13]) + id_bytes > INT32_MAX) break;
        next = i + 1;
        if (n == 0) continue;
        const unsigned char *prod = p + m.prod_at, *sv = m.sv_at >= 0 ? p + m.sv_at : NULL;
        Py_ssize_t sv_len = m.sv_at >= 0 ? m.sv_len : -1;
        if (run < 0 || last_prod_len != m.prod_len || memcmp(last_prod, prod, (size_t)m.prod_len) ||
            last_sv_len != sv_len || (sv_len > 0 && memcmp(last_sv, sv, (size_t)sv_len))) {
            PyObject *name = PyUnicode_DecodeUTF8((const char *)prod, m.prod_len, NULL);
            PyObject *version = sv == NULL ? Py_NewRef(Py_None)
                                           : PyBytes_FromStringAndSize((const char *)sv, sv_len);
            int bad = name == NULL || version == NULL || PyList_Append(producers, name) ||
                      PyList_Append(versions, version);
            Py_XDECREF(name);
            Py_XDECREF(version);
            if (bad) { failed = 2; goto done; }
            run = (int32_t)(PyList_GET_SIZE(producers) - 1);
            last_prod = prod; last_prod_len = m.prod_len; last_sv = sv; last_sv_len = sv_len;
        }
        int64_t publish = (int64_t)m.publish * 1000;  /* microseconds (in range: checked) */
        /* the rows the batch will hold: max_rows, or fewer when its value bytes will reach
         * max_bytes first (at this entry's bytes per row); the per-row columns' growth cap */
        Caps ecaps = caps;
        if (tv > 0 && n > 0) {
            Py_ssize_t left = caps.values - PyByteArray_GET_SIZE(ba[4]) - tv;
            Py_ssize_t more = left > 0 ? left / (tv / n + 1) + 1 : 0;
            Py_ssize_t by_bytes = PyByteArray_GET_SIZE(ba[2]) + n + more;
            if (by_bytes < ecaps.rows) ecaps.rows = by_bytes;
        }
        /* the rich columns first (their positions are in q, as the values'): they fill in the
         * rows staged before (is_null: one byte a row) */
        if (rich_write(&rich, rb, q, PyByteArray_GET_SIZE(ba[2]), ecaps) ||
            write_rows(ba, q, rows, n, tv, tk, ecaps) ||
            write_entry_cols(ba, rows, n, ledger, entry, publish, run, prefix, plen, id_bytes,
                             first_entries, ecaps)) { failed = 2; goto done; }
        added += n;
        if (added >= max_rows || PyByteArray_GET_SIZE(ba[4]) >= max_bytes) break;
    }
    if (failed) goto done;
    result = Py_BuildValue("(nn)", next, added);
done:
    Py_XDECREF(plain);
    rich_free(&rich);
    PyMem_Free(rows);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    if (failed) { Py_CLEAR(result); return NULL; }
    return result;
}

/* message_ids_into(prefix, index, offsets, data): prefix + str(i) for each int32 i of index
 * appended to the message_id column (offsets: int32, not empty; data: the bytes); for the
 * entries the Python path stages */
static PyObject *message_ids_into(PyObject *self, PyObject *args) {
    Py_buffer prefix, index;
    PyObject *offsets, *data;
    if (!PyArg_ParseTuple(args, "y*y*O!O!", &prefix, &index, &PyByteArray_Type, &offsets,
                          &PyByteArray_Type, &data)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = index.len / 4, total = 0;
    const char *pre = (const char *)prefix.buf;
    if (index.len % 4 || PyByteArray_GET_SIZE(offsets) < 4 || prefix.len > 64) {
        PyErr_SetString(PyExc_ValueError, "message_ids_into: int32 indexes, offsets not empty");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t v;
        memcpy(&v, (const char *)index.buf + 4 * i, 4);
        total += prefix.len + digits(v);
    }
    if ((int64_t)last_i32(offsets) + total > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "message ids of more than 2 GiB in one batch");
        goto done;
    }
    int32_t off = last_i32(offsets);
    char *o = grow(offsets, 4 * n), *w;
    if (o == NULL || (w = grow(data, total)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t v;
        memcpy(&v, (const char *)index.buf + 4 * i, 4);
        memcpy(w, pre, (size_t)prefix.len);
        int len = (int)prefix.len + fmt_i64(w + prefix.len, v);
        w += len; off += len;
        memcpy(o + 4 * i, &off, 4);
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&index);
    return result;
}

/* crc32c(data, crc=0, hw=True): the CRC32C of data going on from crc (the crc32c package's
 * crc32c(data, crc)); hw=False takes the table path even with SSE4.2 (for the tests) */
static PyObject *py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer buf;
    unsigned int crc = 0;
    int hw = 1;
    if (!PyArg_ParseTuple(args, "y*|Ip", &buf, &crc, &hw)) return NULL;
    uint32_t v;
    Py_BEGIN_ALLOW_THREADS
    v = crc32c_update(crc, (const unsigned char *)buf.buf, (size_t)buf.len, hw);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(v);
}

#endif
