/*
 * PostgreSQL `COPY … TO STDOUT (FORMAT binary)` → Arrow column buffers, without the GIL.
 *
 * Why this exists (rivet_core/source/pg_binary.py has the whole story): reading the COPY
 * stream one CopyData message at a time from Python costs ~1 µs a row (10 M rows: 9.7 s,
 * twice the `psql \copy` floor), and the ADBC PostgreSQL driver wheels are built without
 * compiler optimisation (their decode was ~40 % of rivet's CPU on the bench `orders`).
 *
 * Two functions, both bounds-checked on every read:
 *
 *   fetch(get_copy_data, freemem, pgconn, max_bytes) -> (bytes, status)
 *       Calls libpq's PQgetCopyData(pgconn, &buf, 0) (blocking) until at least
 *       `max_bytes` are gathered or the COPY ends, with the GIL released, and returns the
 *       concatenated CopyData payloads. status: 0 = more may follow, 1 = end of the COPY
 *       data (the caller fetches the final result), 2 = libpq reported an error (the caller
 *       fetches the error result). The three addresses come from the libpq that psycopg
 *       loaded (ctypes) and from psycopg's `PGconn.pgconn_ptr`; the caller guarantees that
 *       no other thread uses the connection meanwhile.
 *
 *   decode(data, offset, kinds, precisions, scales, max_rows)
 *       -> (columns, rows, next_offset, ended)
 *       Decodes whole tuples from data[offset:] (a tuple cut off at the end is left for
 *       the next call; `ended` is True once the -1 trailer was read). `kinds` has one
 *       character per column (see KIND_* below); `columns` holds per column
 *       (validity_bitmap_or_None, null_count, values, data_or_None) — the buffers of an
 *       Arrow array (var-width: int32 offsets + data). Values are converted to Arrow's
 *       representation here: network → host byte order, dates/timestamps from the 2000
 *       epoch to 1970, numeric base-10000 digits → decimal128 of the column's scale, jsonb
 *       without its version byte. A value Arrow cannot hold raises ValueError with args
 *       ("value", column, code) — codes below — and malformed data ("protocol", column,
 *       row); pg_binary.py turns both into the messages the other read paths give.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int (*get_copy_data_fn)(void *conn, char **buffer, int async);
typedef void (*freemem_fn)(void *ptr);

/* Column kinds (one byte each in `kinds`). */
#define KIND_BOOL 'b'
#define KIND_INT2 'h'
#define KIND_INT4 'i'
#define KIND_INT8 'l'
#define KIND_FLOAT4 'f'
#define KIND_FLOAT8 'd'
#define KIND_DATE 'D'      /* int32 days since 2000-01-01 → date32 */
#define KIND_TIME 'T'      /* int64 µs since midnight → time64[us] */
#define KIND_TIMESTAMP 'S' /* int64 µs since 2000-01-01 → timestamp[us] (also timestamptz) */
#define KIND_TEXT 's'      /* text, varchar, bpchar, name, json: bytes as sent */
#define KIND_BYTES 'y'     /* bytea */
#define KIND_JSONB 'j'     /* jsonb: a version byte (1) then the text */
#define KIND_UUID 'u'      /* 16 bytes */
#define KIND_UUID_TEXT 'U' /* 16 bytes → the 36-character text form (a `columns:` string override) */
#define KIND_NUMERIC 'n'   /* → decimal128(precision, scale) */

/* ValueError("value", column, code) codes. */
#define ERR_TEMPORAL_RANGE 1 /* outside 0001-01-01 .. 9999-12-31 (e.g. ±infinity) */
#define ERR_TIME_24 2        /* 24:00:00 */
#define ERR_NUMERIC_NAN 3
#define ERR_NUMERIC_PINF 4
#define ERR_NUMERIC_NINF 5
#define ERR_NUMERIC_FIT 6 /* more digits than precision, or fractional digits beyond scale */

#define EPOCH_DAYS 10957                       /* 1970-01-01 → 2000-01-01 */
#define EPOCH_US (10957LL * 86400000000LL)
#define MIN_DAY (-719162LL)                   /* 0001-01-01, days since 1970 */
#define MAX_DAY 2932896LL                     /* 9999-12-31 */
#define DAY_US 86400000000LL
#define MIN_US (MIN_DAY * DAY_US)
#define MAX_US ((MAX_DAY + 1) * DAY_US - 1)

static inline uint16_t rd16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t rd32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline uint64_t rd64(const unsigned char *p) { return ((uint64_t)rd32(p) << 32) | rd32(p + 4); }

/* ------------------------------------------------------------------------------ fetch */

static PyObject *fetch(PyObject *self, PyObject *args) {
    unsigned long long get_addr, free_addr, conn_addr;
    Py_ssize_t max_bytes;
    if (!PyArg_ParseTuple(args, "KKKn", &get_addr, &free_addr, &conn_addr, &max_bytes))
        return NULL;
    if (!get_addr || !free_addr || !conn_addr || max_bytes < 1) {
        PyErr_SetString(PyExc_ValueError, "fetch: null function/connection or max_bytes < 1");
        return NULL;
    }
    get_copy_data_fn get = (get_copy_data_fn)(uintptr_t)get_addr;
    freemem_fn release = (freemem_fn)(uintptr_t)free_addr;
    void *conn = (void *)(uintptr_t)conn_addr;
    size_t cap = (size_t)max_bytes + 65536, len = 0;
    char *out = NULL;
    int status = 0, oom = 0;
    Py_BEGIN_ALLOW_THREADS
    out = malloc(cap);
    if (out == NULL)
        oom = 1;
    while (!oom && len < (size_t)max_bytes) {
        char *msg = NULL;
        int n = get(conn, &msg, 0);
        if (n > 0) {
            if (len + (size_t)n > cap) {
                size_t want = cap * 2 > len + (size_t)n ? cap * 2 : len + (size_t)n;
                char *grown = realloc(out, want);
                if (grown == NULL) {
                    oom = 1;
                    release(msg);
                    break;
                }
                out = grown;
                cap = want;
            }
            memcpy(out + len, msg, (size_t)n);
            len += (size_t)n;
            release(msg);
        } else {
            if (msg != NULL)
                release(msg);
            status = (n == -1) ? 1 : 2;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (oom) {
        free(out);
        return PyErr_NoMemory();
    }
    PyObject *data = PyBytes_FromStringAndSize(out, (Py_ssize_t)len);
    free(out);
    if (data == NULL)
        return NULL;
    return Py_BuildValue("(Ni)", data, status);
}

/* ----------------------------------------------------------------------------- decode */

typedef struct {
    char kind;
    int precision, scale;
    Py_ssize_t nulls;
    Py_ssize_t var_bytes; /* var-width kinds: total payload bytes */
    PyObject *validity, *values, *data;
    unsigned char *vbits, *vals, *vdata;
    Py_ssize_t vpos; /* var-width write position */
} Column;

static int fixed_width(char kind) {
    switch (kind) {
    case KIND_BOOL: return 0; /* bit-packed */
    case KIND_INT2: return 2;
    case KIND_INT4: case KIND_FLOAT4: case KIND_DATE: return 4;
    case KIND_INT8: case KIND_FLOAT8: case KIND_TIME: case KIND_TIMESTAMP: return 8;
    case KIND_UUID: case KIND_NUMERIC: return 16;
    default: return -1; /* var-width */
    }
}

/* The wire length a fixed-width kind must have (-1: any). */
static int wire_width(char kind) {
    switch (kind) {
    case KIND_BOOL: return 1;
    case KIND_INT2: return 2;
    case KIND_INT4: case KIND_FLOAT4: case KIND_DATE: return 4;
    case KIND_INT8: case KIND_FLOAT8: case KIND_TIME: case KIND_TIMESTAMP: return 8;
    case KIND_UUID: case KIND_UUID_TEXT: return 16;
    default: return -1;
    }
}

static const unsigned __int128 *pow10_table(void) {
    static unsigned __int128 table[40];
    static int ready = 0;
    if (!ready) {
        unsigned __int128 v = 1;
        for (int i = 0; i < 40; i++) {
            table[i] = v;
            v *= 10;
        }
        ready = 1;
    }
    return table;
}

/* PG binary numeric → two's complement int128 scaled by 10^scale. 0 or an ERR_* code. */
static int numeric_to_decimal(const unsigned char *p, int32_t len, int precision, int scale,
                              unsigned char out[16], int *protocol) {
    const unsigned __int128 *p10 = pow10_table();
    if (len < 8) {
        *protocol = 1;
        return -1;
    }
    int ndigits = (int16_t)rd16(p), weight = (int16_t)rd16(p + 2);
    uint16_t sign = rd16(p + 4);
    if (sign == 0xC000) return ERR_NUMERIC_NAN;
    if (sign == 0xD000) return ERR_NUMERIC_PINF;
    if (sign == 0xF000) return ERR_NUMERIC_NINF;
    if ((sign != 0x0000 && sign != 0x4000) || ndigits < 0 || len != 8 + 2 * ndigits) {
        *protocol = 1;
        return -1;
    }
    unsigned __int128 acc = 0;
    for (int i = 0; i < ndigits; i++) {
        unsigned int digit = rd16(p + 8 + 2 * i);
        if (digit > 9999) {
            *protocol = 1;
            return -1;
        }
        if (digit == 0)
            continue;
        long e = 4L * ((long)weight - i) + scale; /* this digit's power of ten, scaled */
        if (e < 0) {
            long drop = -e;
            if (drop >= 4) return ERR_NUMERIC_FIT; /* a non-zero digit beyond the scale */
            unsigned int div = (unsigned int)p10[drop];
            if (digit % div) return ERR_NUMERIC_FIT;
            digit /= div;
            e = 0;
        }
        if (e >= precision) return ERR_NUMERIC_FIT;
        if (precision - e <= 4 && digit >= p10[precision - e]) return ERR_NUMERIC_FIT;
        acc += (unsigned __int128)digit * p10[e]; /* < 10^precision ≤ 10^38: no overflow */
        if (acc >= p10[precision]) return ERR_NUMERIC_FIT;
    }
    __int128 value = (__int128)acc;
    if (sign == 0x4000) value = -value;
    memcpy(out, &value, 16); /* little-endian hosts only (checked at import) */
    return 0;
}

static void clear_columns(Column *cols, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_CLEAR(cols[i].validity);
        Py_CLEAR(cols[i].values);
        Py_CLEAR(cols[i].data);
    }
}

static PyObject *protocol_error(Py_ssize_t column, Py_ssize_t row) {
    PyObject *args = Py_BuildValue("(snn)", "protocol", column, row);
    if (args != NULL) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer buf, kinds;
    Py_ssize_t offset, max_rows;
    PyObject *precisions, *scales;
    if (!PyArg_ParseTuple(args, "y*ny*OOn", &buf, &offset, &kinds, &precisions, &scales, &max_rows))
        return NULL;
    PyObject *result = NULL;
    Column *cols = NULL;
    Py_ssize_t ncols = kinds.len;
    const unsigned char *base = (const unsigned char *)buf.buf;
    Py_ssize_t size = buf.len;
    if (offset < 0 || offset > size || max_rows < 0 || ncols < 1 || ncols > 1600 ||
        !PyList_Check(precisions) || !PyList_Check(scales) ||
        PyList_GET_SIZE(precisions) != ncols || PyList_GET_SIZE(scales) != ncols) {
        PyErr_SetString(PyExc_ValueError, "decode: bad offset, max_rows, kinds or precisions/scales");
        goto done;
    }
    cols = calloc((size_t)ncols, sizeof(Column));
    if (cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t c = 0; c < ncols; c++) {
        cols[c].kind = ((const char *)kinds.buf)[c];
        cols[c].precision = (int)PyLong_AsLong(PyList_GET_ITEM(precisions, c));
        cols[c].scale = (int)PyLong_AsLong(PyList_GET_ITEM(scales, c));
        if (PyErr_Occurred()) goto done;
        if (cols[c].kind == KIND_NUMERIC &&
            (cols[c].precision < 1 || cols[c].precision > 38 || cols[c].scale < 0 || cols[c].scale > 38)) {
            PyErr_SetString(PyExc_ValueError, "decode: numeric needs 1 <= precision <= 38, 0 <= scale");
            goto done;
        }
        if (!strchr("bhilfdDTSsyjunU", cols[c].kind)) {
            PyErr_Format(PyExc_ValueError, "decode: unknown column kind %c", cols[c].kind);
            goto done;
        }
    }

    /* Pass 1: find the whole tuples, count NULLs and var-width bytes; check the framing. */
    Py_ssize_t rows = 0, pos = offset, bad_col = -1;
    int ended = 0;
    Py_BEGIN_ALLOW_THREADS
    while (rows < max_rows && pos + 2 <= size) {
        int16_t nfields = (int16_t)rd16(base + pos);
        if (nfields == -1) {
            ended = 1;
            pos += 2;
            break;
        }
        if (nfields != ncols) {
            bad_col = 0;
            break;
        }
        Py_ssize_t p = pos + 2;
        int whole = 1;
        for (Py_ssize_t c = 0; c < ncols; c++) {
            if (p + 4 > size) {
                whole = 0;
                break;
            }
            int32_t len = (int32_t)rd32(base + p);
            p += 4;
            if (len == -1)
                continue;
            if (len < 0) {
                bad_col = c;
                break;
            }
            if (p + len > size) {
                whole = 0;
                break;
            }
            int ww = wire_width(cols[c].kind);
            if ((ww >= 0 && len != ww) || (cols[c].kind == KIND_JSONB && (len < 1 || base[p] != 1))) {
                bad_col = c;
                break;
            }
            p += len;
        }
        if (bad_col >= 0 || !whole)
            break;
        pos = p;
        rows++;
    }
    Py_END_ALLOW_THREADS
    if (bad_col >= 0) {
        protocol_error(bad_col, rows);
        goto done;
    }
    /* Count NULLs and var-width sizes over the rows found (cheap second walk of lengths). */
    Py_BEGIN_ALLOW_THREADS
    {
        Py_ssize_t p = offset;
        for (Py_ssize_t r = 0; r < rows; r++) {
            p += 2;
            for (Py_ssize_t c = 0; c < ncols; c++) {
                int32_t len = (int32_t)rd32(base + p);
                p += 4;
                if (len == -1) {
                    cols[c].nulls++;
                    continue;
                }
                if (fixed_width(cols[c].kind) < 0)
                    cols[c].var_bytes += (cols[c].kind == KIND_JSONB) ? len - 1
                                         : (cols[c].kind == KIND_UUID_TEXT) ? 36 : len;
                p += len;
            }
        }
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t c = 0; c < ncols; c++) {
        Column *col = &cols[c];
        if (col->var_bytes > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "decode: more than 2 GiB of values in one batch");
            goto done;
        }
        Py_ssize_t bitmap = (rows + 7) / 8;
        if (col->nulls) {
            col->validity = PyBytes_FromStringAndSize(NULL, bitmap);
            if (col->validity == NULL) goto done;
            col->vbits = (unsigned char *)PyBytes_AS_STRING(col->validity);
            memset(col->vbits, 0, (size_t)bitmap);
        }
        int fw = fixed_width(col->kind);
        Py_ssize_t vsize = fw > 0 ? rows * fw : fw == 0 ? bitmap : (rows + 1) * 4;
        col->values = PyBytes_FromStringAndSize(NULL, vsize);
        if (col->values == NULL) goto done;
        col->vals = (unsigned char *)PyBytes_AS_STRING(col->values);
        if (fw == 0) memset(col->vals, 0, (size_t)bitmap);
        if (fw < 0) {
            col->data = PyBytes_FromStringAndSize(NULL, col->var_bytes);
            if (col->data == NULL) goto done;
            col->vdata = (unsigned char *)PyBytes_AS_STRING(col->data);
            memset(col->vals, 0, 4);
        }
    }

    /* Pass 2: convert the values (GIL released; the buffers are ours alone until returned). */
    Py_ssize_t err_col = -1, err_row = -1;
    int err_code = 0, err_protocol = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t p = offset;
    for (Py_ssize_t r = 0; r < rows && err_code == 0; r++) {
        p += 2;
        for (Py_ssize_t c = 0; c < ncols; c++) {
            Column *col = &cols[c];
            int32_t len = (int32_t)rd32(base + p);
            p += 4;
            const unsigned char *v = base + p;
            int fw = fixed_width(col->kind);
            if (len == -1) {
                if (fw > 0)
                    memset(col->vals + r * fw, 0, (size_t)fw);
                else if (fw < 0)
                    memcpy(col->vals + (r + 1) * 4, &(int32_t){(int32_t)col->vpos}, 4);
                continue;
            }
            p += len;
            if (col->vbits)
                col->vbits[r >> 3] |= (unsigned char)(1u << (r & 7));
            switch (col->kind) {
            case KIND_BOOL:
                if (v[0]) col->vals[r >> 3] |= (unsigned char)(1u << (r & 7));
                break;
            case KIND_INT2: {
                uint16_t x = rd16(v);
                memcpy(col->vals + r * 2, &x, 2);
                break;
            }
            case KIND_INT4: case KIND_FLOAT4: {
                uint32_t x = rd32(v);
                memcpy(col->vals + r * 4, &x, 4);
                break;
            }
            case KIND_INT8: case KIND_FLOAT8: {
                uint64_t x = rd64(v);
                memcpy(col->vals + r * 8, &x, 8);
                break;
            }
            case KIND_DATE: {
                int64_t days = (int64_t)(int32_t)rd32(v) + EPOCH_DAYS;
                if (days < MIN_DAY || days > MAX_DAY) {
                    err_code = ERR_TEMPORAL_RANGE;
                    break;
                }
                int32_t out = (int32_t)days;
                memcpy(col->vals + r * 4, &out, 4);
                break;
            }
            case KIND_TIME: {
                int64_t us = (int64_t)rd64(v);
                if (us < 0 || us >= DAY_US) {
                    err_code = ERR_TIME_24;
                    break;
                }
                memcpy(col->vals + r * 8, &us, 8);
                break;
            }
            case KIND_TIMESTAMP: {
                int64_t raw = (int64_t)rd64(v);
                if (raw < MIN_US - EPOCH_US || raw > MAX_US - EPOCH_US) {
                    err_code = ERR_TEMPORAL_RANGE;
                    break;
                }
                int64_t us = raw + EPOCH_US;
                memcpy(col->vals + r * 8, &us, 8);
                break;
            }
            case KIND_UUID:
                memcpy(col->vals + r * 16, v, 16);
                break;
            case KIND_UUID_TEXT: { /* PostgreSQL's own text form: lower-case 8-4-4-4-12 */
                static const char hex[] = "0123456789abcdef";
                unsigned char *out = col->vdata + col->vpos;
                for (int i = 0, o = 0; i < 16; i++) {
                    if (i == 4 || i == 6 || i == 8 || i == 10)
                        out[o++] = '-';
                    out[o++] = (unsigned char)hex[v[i] >> 4];
                    out[o++] = (unsigned char)hex[v[i] & 15];
                }
                col->vpos += 36;
                int32_t end = (int32_t)col->vpos;
                memcpy(col->vals + (r + 1) * 4, &end, 4);
                break;
            }
            case KIND_NUMERIC: {
                int protocol = 0;
                int rc = numeric_to_decimal(v, len, col->precision, col->scale, col->vals + r * 16, &protocol);
                if (protocol) {
                    err_protocol = 1;
                    err_code = -1;
                } else if (rc) {
                    err_code = rc;
                }
                break;
            }
            default: { /* var-width */
                const unsigned char *src = v;
                int32_t n = len;
                if (col->kind == KIND_JSONB) {
                    src++;
                    n--;
                }
                memcpy(col->vdata + col->vpos, src, (size_t)n);
                col->vpos += n;
                int32_t end = (int32_t)col->vpos;
                memcpy(col->vals + (r + 1) * 4, &end, 4);
            }
            }
            if (err_code) {
                err_col = c;
                err_row = r;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (err_protocol) {
        protocol_error(err_col, err_row);
        goto done;
    }
    if (err_code) {
        PyObject *eargs = Py_BuildValue("(sni)", "value", err_col, err_code);
        if (eargs != NULL) {
            PyErr_SetObject(PyExc_ValueError, eargs);
            Py_DECREF(eargs);
        }
        goto done;
    }
    PyObject *columns = PyList_New(ncols);
    if (columns == NULL) goto done;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        Column *col = &cols[c];
        PyObject *item = Py_BuildValue("(OnOO)", col->validity ? col->validity : Py_None, col->nulls,
                                       col->values, col->data ? col->data : Py_None);
        if (item == NULL) {
            Py_DECREF(columns);
            goto done;
        }
        PyList_SET_ITEM(columns, c, item);
    }
    result = Py_BuildValue("(NnnO)", columns, rows, pos, ended ? Py_True : Py_False);

done:
    if (cols != NULL) {
        clear_columns(cols, ncols);
        free(cols);
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&kinds);
    return result;
}

static PyMethodDef methods[] = {
    {"fetch", fetch, METH_VARARGS, "fetch(get_copy_data, freemem, pgconn, max_bytes) -> (bytes, status)"},
    {"decode", decode, METH_VARARGS,
     "decode(data, offset, kinds, precisions, scales, max_rows) -> (columns, rows, next_offset, ended)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pgbinary",
    "PostgreSQL binary COPY: fetch CopyData and decode tuples into Arrow buffers (GIL released).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__pgbinary(void) {
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "_pgbinary supports little-endian hosts only");
        return NULL;
    }
    (void)pow10_table();
    return PyModule_Create(&module);
}
