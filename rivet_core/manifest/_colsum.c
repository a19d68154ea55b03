/*
 * Form B column checksums of variable-width Arrow columns, without Python objects or the GIL.
 *
 * Why this exists (rivet_core/manifest/column_checksums.py has the algorithm): the
 * `rivet-colsum-v1` hash of a string or binary value is pandas' vectorized SipHash
 * (`pandas.util.hash_array(..., categorize=False)`: SipHash-2-4 with the key
 * "0123456789123456", then pandas' 64-bit finalizer), salted and mixed with splitmix64.
 * Done through pandas, every value first becomes a Python bytes object (~60 bytes of
 * overhead each, and importing pandas costs ~0.5 s); here the same hash runs straight over
 * the Arrow buffers. The result is bit-identical to the pandas path, which stays the
 * fallback when this extension is not built (tests/format/test_colsum_write_time.py
 * compares both).
 *
 *   binary_sum(offsets, data, validity_or_None, offset, length, wide, salt) -> int
 *       The wrapping (mod 2**64) sum over the non-null values of one Arrow binary/string
 *       array of mix(pandas_mix(siphash24(value)) ^ salt). `offsets` is the array's offsets
 *       buffer (int32, or int64 when `wide`), `data` its value bytes, `validity` its bitmap
 *       (None = no nulls); `offset`/`length` are the array's slice. Every offset is checked
 *       against the data buffer (ValueError on a malformed array).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                         \
    do {                                                                                 \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                        \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                           \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                           \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                        \
    } while (0)

static inline uint64_t load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* SipHash-2-4 (Aumasson & Bernstein reference), 64-bit output, key k0/k1. */
static uint64_t siphash24(const uint8_t *in, size_t inlen, uint64_t k0, uint64_t k1) {
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    uint64_t b = ((uint64_t)inlen) << 56;
    const uint8_t *end = in + inlen - (inlen % 8);
    for (; in != end; in += 8) {
        uint64_t m = load_le64(in);
        v3 ^= m;
        SIPROUND; SIPROUND;
        v0 ^= m;
    }
    switch (inlen & 7) {
    case 7: b |= ((uint64_t)in[6]) << 48; /* fall through */
    case 6: b |= ((uint64_t)in[5]) << 40; /* fall through */
    case 5: b |= ((uint64_t)in[4]) << 32; /* fall through */
    case 4: b |= ((uint64_t)in[3]) << 24; /* fall through */
    case 3: b |= ((uint64_t)in[2]) << 16; /* fall through */
    case 2: b |= ((uint64_t)in[1]) << 8;  /* fall through */
    case 1: b |= ((uint64_t)in[0]); break;
    case 0: break;
    }
    v3 ^= b;
    SIPROUND; SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND; SIPROUND; SIPROUND; SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* pandas' redistribution step after hash_object_array (pandas/core/util/hashing.py). */
static inline uint64_t pandas_mix(uint64_t z) {
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* column_checksums._mix: splitmix64 finalizer of (u ^ salt). */
static inline uint64_t colsum_mix(uint64_t u, uint64_t salt) {
    uint64_t z = (u ^ salt) + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The key pandas hashes with: "0123456789123456" as two little-endian words. */
static const uint8_t PANDAS_KEY[16] = {'0', '1', '2', '3', '4', '5', '6', '7',
                                       '8', '9', '1', '2', '3', '4', '5', '6'};

static PyObject *binary_sum(PyObject *self, PyObject *args) {
    Py_buffer offs, data, valid;
    PyObject *valid_obj;
    Py_ssize_t offset, length;
    int wide;
    unsigned long long salt;
    if (!PyArg_ParseTuple(args, "y*y*OnnpK", &offs, &data, &valid_obj, &offset, &length, &wide, &salt))
        return NULL;
    int has_valid = valid_obj != Py_None;
    if (has_valid && PyObject_GetBuffer(valid_obj, &valid, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&offs);
        PyBuffer_Release(&data);
        return NULL;
    }
    const char *err = NULL;
    Py_ssize_t width = wide ? 8 : 4;
    if (offset < 0 || length < 0 || (offset + length + 1) * width > offs.len)
        err = "offsets buffer too short for the array";
    else if (has_valid && (offset + length + 7) / 8 > valid.len)
        err = "validity bitmap too short for the array";
    uint64_t total = 0;
    if (err == NULL && length > 0) {
        const uint8_t *bits = has_valid ? (const uint8_t *)valid.buf : NULL;
        const uint8_t *bytes = (const uint8_t *)data.buf;
        const int32_t *o32 = (const int32_t *)offs.buf;
        const int64_t *o64 = (const int64_t *)offs.buf;
        uint64_t k0 = load_le64(PANDAS_KEY), k1 = load_le64(PANDAS_KEY + 8);
        uint64_t salt64 = (uint64_t)salt;
        Py_ssize_t dlen = data.len;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = offset; i < offset + length; i++) {
            if (bits != NULL && !((bits[i >> 3] >> (i & 7)) & 1))
                continue;
            int64_t lo = wide ? o64[i] : (int64_t)o32[i];
            int64_t hi = wide ? o64[i + 1] : (int64_t)o32[i + 1];
            if (lo < 0 || hi < lo || hi > dlen) {
                err = "offset outside the data buffer";
                break;
            }
            uint64_t h = siphash24(bytes + lo, (size_t)(hi - lo), k0, k1);
            total += colsum_mix(pandas_mix(h), salt64);
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&offs);
    PyBuffer_Release(&data);
    if (has_valid)
        PyBuffer_Release(&valid);
    if (err != NULL) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)total);
}

static PyMethodDef methods[] = {
    {"binary_sum", binary_sum, METH_VARARGS,
     "Wrapping sum of the rivet-colsum-v1 hashes of one Arrow binary/string array's values."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_colsum",
    "Form B column checksums of Arrow binary/string arrays (see _colsum.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__colsum(void) { return PyModule_Create(&module); }
