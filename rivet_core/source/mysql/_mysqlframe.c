/* MySQL / MariaDB row-packet framing for rivet_core.source.mysql_raw, without the GIL.
 *
 * gather(data, start, length, out) -> total
 *
 * Copies the byte ranges data[start[i] : start[i] + length[i]] back to back into `out`
 * (the values of one column, for an Arrow binary array) and returns the bytes written.
 * Every range is checked against `data` and the running total against `out` before it
 * is copied (ValueError otherwise). Replaces a numpy gather that built an 8-byte index
 * per value byte; the pure-Python twin is mysql_raw.gather_py.
 *
 * frame(buf, pos, seq, count, base, starts, ends, out_at) -> (new_pos, new_seq, taken)
 *
 * Walks the packets of `buf` (any read-only contiguous buffer; the reader passes an
 * immutable `bytes`) from offset `pos`. A packet is a 3-byte little-endian payload length,
 * a 1-byte sequence number and the payload. It stops, without consuming the packet, at:
 *   - a packet (or its 4-byte header, or a header with no payload byte) not wholly in `buf`;
 *   - length == 0, or length >= 0xFFFFFF (the first part of a multi-packet row);
 *   - a sequence byte other than the expected `seq`;
 *   - a first payload byte 0xFF (error packet), or 0xFE with length < 9 (EOF packet);
 *   - `count` packets taken.
 * For the i-th accepted packet at offset p it writes starts[out_at + i] = base + p + 4 and
 * ends[out_at + i] = base + p + 4 + length. Returns the offset after the last accepted
 * packet, the next expected sequence number ((seq + taken) mod 256) and the number taken.
 *
 * `starts`/`ends` are writable C-contiguous int64 buffers (numpy int64 arrays) that must
 * hold out_at + count items each; anything else raises ValueError (nothing is written).
 * The pure-Python twin with the same semantics is mysql_raw.frame_py.
 *
 * The loop runs with the GIL released: the Py_buffer views held for the call keep every
 * buffer alive and unresizable (exporters refuse to resize while a view is held).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_PACKET 0xFFFFFFu

static int
int64_view_flags(PyObject *obj, Py_buffer *view, const char *name, int writable)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT
                                      | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "%s must be a %sC-contiguous int64 buffer (got %.100s)",
                     name, writable ? "writable " : "", Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *fmt = view->format ? view->format : "B";
    if (*fmt == '@' || *fmt == '=' || *fmt == '<') {
#if PY_LITTLE_ENDIAN
        fmt++;
#else
        if (*fmt == '<') fmt = "?";
        else fmt++;
#endif
    }
    if (view->itemsize != 8 || !(strcmp(fmt, "q") == 0 || strcmp(fmt, "l") == 0)) {
        PyErr_Format(PyExc_ValueError,
                     "%s must hold int64 items (format '%s', item size %zd)",
                     name, view->format ? view->format : "B", view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int
int64_view(PyObject *obj, Py_buffer *view, const char *name)
{
    return int64_view_flags(obj, view, name, 1);
}

static PyObject *
gather(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer data, start_view, length_view, out;
    PyObject *start_obj, *length_obj;

    if (!PyArg_ParseTuple(args, "y*OOw*:gather", &data, &start_obj, &length_obj, &out)) {
        return NULL;
    }
    if (int64_view_flags(start_obj, &start_view, "start", 0) < 0) {
        goto fail_data;
    }
    if (int64_view_flags(length_obj, &length_view, "length", 0) < 0) {
        goto fail_start;
    }
    if (start_view.len != length_view.len) {
        PyErr_Format(PyExc_ValueError, "start (%zd items) and length (%zd items) differ",
                     start_view.len / 8, length_view.len / 8);
        goto fail_length;
    }
    {
        const int64_t *st = (const int64_t *)start_view.buf, *ln = (const int64_t *)length_view.buf;
        const Py_ssize_t n = start_view.len / 8;
        const int64_t size = (int64_t)data.len, room = (int64_t)out.len;
        const unsigned char *src = (const unsigned char *)data.buf;
        unsigned char *dst = (unsigned char *)out.buf;
        int64_t total = 0;
        Py_ssize_t bad = -1;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            const int64_t a = st[i], k = ln[i];
            if (a < 0 || k < 0 || a > size || k > size - a || k > room - total) {
                bad = i;
                break;
            }
            memcpy(dst + total, src + a, (size_t)k);
            total += k;
        }
        Py_END_ALLOW_THREADS
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError,
                         "value %zd (start %lld, length %lld) is outside the data (%zd bytes) "
                         "or overflows the output (%zd bytes)", bad, (long long)st[bad],
                         (long long)ln[bad], data.len, out.len);
            goto fail_length;
        }
        PyBuffer_Release(&length_view);
        PyBuffer_Release(&start_view);
        PyBuffer_Release(&out);
        PyBuffer_Release(&data);
        return PyLong_FromLongLong((long long)total);
    }

fail_length:
    PyBuffer_Release(&length_view);
fail_start:
    PyBuffer_Release(&start_view);
fail_data:
    PyBuffer_Release(&out);
    PyBuffer_Release(&data);
    return NULL;
}

static PyObject *
frame(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer data, starts_view, ends_view;
    Py_ssize_t pos, count, out_at;
    long long base;
    int seq;
    PyObject *starts_obj, *ends_obj;

    if (!PyArg_ParseTuple(args, "y*ninLOOn:frame", &data, &pos, &seq, &count, &base,
                          &starts_obj, &ends_obj, &out_at)) {
        return NULL;
    }
    const Py_ssize_t n = data.len;
    if (pos < 0 || pos > n) {
        PyErr_Format(PyExc_ValueError, "pos %zd is outside the buffer (0..%zd)", pos, n);
        goto fail_data;
    }
    if (seq < 0 || seq > 255) {
        PyErr_Format(PyExc_ValueError, "seq %d is not a sequence number (0..255)", seq);
        goto fail_data;
    }
    if (count < 0 || out_at < 0) {
        PyErr_Format(PyExc_ValueError, "count (%zd) and out_at (%zd) must be >= 0", count, out_at);
        goto fail_data;
    }
    /* base + offset must fit in int64 for every offset of buf */
    if (base < 0 || base > (long long)(INT64_MAX - (int64_t)n - 4)) {
        PyErr_Format(PyExc_ValueError, "base %lld is out of range", base);
        goto fail_data;
    }
    if (int64_view(starts_obj, &starts_view, "starts") < 0) {
        goto fail_data;
    }
    if (int64_view(ends_obj, &ends_view, "ends") < 0) {
        goto fail_starts;
    }
    const Py_ssize_t cap_s = starts_view.len / 8, cap_e = ends_view.len / 8;
    if (out_at > cap_s || count > cap_s - out_at || out_at > cap_e || count > cap_e - out_at) {
        PyErr_Format(PyExc_ValueError,
                     "out_at %zd + count %zd exceeds the output buffers (starts %zd, ends %zd items)",
                     out_at, count, cap_s, cap_e);
        goto fail_ends;
    }
    {
        const char *s_lo = (const char *)starts_view.buf, *e_lo = (const char *)ends_view.buf;
        if (count > 0 && s_lo < e_lo + ends_view.len && e_lo < s_lo + starts_view.len) {
            PyErr_SetString(PyExc_ValueError, "starts and ends must not overlap");
            goto fail_ends;
        }
    }

    const unsigned char *p = (const unsigned char *)data.buf;
    int64_t *out_s = (int64_t *)starts_view.buf + out_at;
    int64_t *out_e = (int64_t *)ends_view.buf + out_at;
    Py_ssize_t taken = 0;
    unsigned int expect = (unsigned int)seq;

    Py_BEGIN_ALLOW_THREADS
    /* n - pos > 4: the header and the first payload byte are inside buf */
    while (taken < count && n - pos > 4) {
        const uint32_t length = (uint32_t)p[pos] | ((uint32_t)p[pos + 1] << 8)
                                | ((uint32_t)p[pos + 2] << 16);
        if (length == 0 || length >= MAX_PACKET || (Py_ssize_t)length > n - pos - 4
                || p[pos + 3] != expect) {
            break;
        }
        const unsigned char first = p[pos + 4];
        if (first == 0xFF || (first == 0xFE && length < 9)) {
            break;
        }
        out_s[taken] = (int64_t)base + (int64_t)pos + 4;
        out_e[taken] = (int64_t)base + (int64_t)pos + 4 + (int64_t)length;
        expect = (expect + 1) & 0xFFu;
        pos += 4 + (Py_ssize_t)length;
        taken++;
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&ends_view);
    PyBuffer_Release(&starts_view);
    PyBuffer_Release(&data);
    return Py_BuildValue("nIn", pos, expect, taken);

fail_ends:
    PyBuffer_Release(&ends_view);
fail_starts:
    PyBuffer_Release(&starts_view);
fail_data:
    PyBuffer_Release(&data);
    return NULL;
}

static PyMethodDef methods[] = {
    {"frame", frame, METH_VARARGS,
     "frame(buf, pos, seq, count, base, starts, ends, out_at) -> (new_pos, new_seq, taken)\n\n"
     "Frame up to `count` whole ordinary MySQL row packets of `buf` from `pos` (GIL released);\n"
     "see rivet_core.source.mysql_raw.frame_py for the semantics."},
    {"gather", gather, METH_VARARGS,
     "gather(data, start, length, out) -> total\n\n"
     "Copy data[start[i]:start[i]+length[i]] back to back into `out` (GIL released);\n"
     "see rivet_core.source.mysql_raw.gather_py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_mysqlframe",
    "MySQL row-packet framing in C for rivet_core.source.mysql_raw (GIL released).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__mysqlframe(void)
{
    return PyModule_Create(&module);
}
