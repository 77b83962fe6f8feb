/* npy.c — see rnnt_npy.h. The header is a Python dict literal; only the three keys numpy writes are
 * accepted, each exactly once, in any order. */
#include "rnnt_npy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "status.h"

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static int eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) { c->p++; return 1; }
    return 0;
}

/* A quoted Python string (single or double quotes, no escapes needed for our keys/values). */
static int read_str(cursor *c, char *out, size_t n)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return -1;
    char q = *c->p++;
    size_t i = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || i + 1 >= n) return -1;
        out[i++] = *c->p++;
    }
    if (c->p >= c->end) return -1;
    c->p++;
    out[i] = 0;
    return 0;
}

static int read_word(cursor *c, char *out, size_t n)
{
    skip_ws(c);
    size_t i = 0;
    while (c->p < c->end && isalpha((unsigned char)*c->p) && i + 1 < n) out[i++] = *c->p++;
    out[i] = 0;
    return i ? 0 : -1;
}

/* (a, b) or (a,) or () — non-negative integers, at most 8. */
static int read_shape(cursor *c, long long *dims, int *nd)
{
    *nd = 0;
    if (!eat(c, '(')) return -1;
    for (;;) {
        skip_ws(c);
        if (eat(c, ')')) return 0;
        if (*nd >= 8 || c->p >= c->end || !isdigit((unsigned char)*c->p)) return -1;
        long long v = 0;
        while (c->p < c->end && isdigit((unsigned char)*c->p)) {
            if (v > (1LL << 40)) return -1;
            v = v * 10 + (*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* numpy < 1.x on Python 2 */
        dims[(*nd)++] = v;
        if (eat(c, ',')) continue;
        if (eat(c, ')')) return 0;
        return -1;
    }
}

rnnt_status rnnt_npy_parse_mem(const char *name, const void *vbuf, size_t len, int expect_cols, int max_rows, rnnt_npy *out,
                               char *err, size_t errlen)
{
    const unsigned char *buf = vbuf;
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6))
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: not a .npy file (bad magic)", name);
    int major = buf[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = buf[8] | (size_t)buf[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: truncated .npy header", name);
        hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hstart = 12;
    } else
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: unsupported .npy version %d.%d", name, major, buf[7]);
    if (hlen > RNNT_NPY_MAX_HEADER)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: .npy header of %zu bytes is larger than %d", name, hlen, RNNT_NPY_MAX_HEADER);
    if (hstart + hlen > len)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: truncated .npy header (%zu bytes announced, %zu present)", name, hlen,
                            len - hstart);
    cursor c = {(const char *)buf + hstart, (const char *)buf + hstart + hlen};
    char descr[16] = "", key[32], word[16];
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0, nd = 0;
    long long dims[8];
    if (!eat(&c, '{')) return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: .npy header is not a dict", name);
    while (!eat(&c, '}')) {
        if (read_str(&c, key, sizeof key) || !eat(&c, ':'))
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: malformed .npy header dict", name);
        if (!strcmp(key, "descr") && !have_descr) {
            if (read_str(&c, descr, sizeof descr)) return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: malformed .npy descr", name);
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order") && !have_order) {
            if (read_word(&c, word, sizeof word) || (strcmp(word, "True") && strcmp(word, "False")))
                return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: malformed .npy fortran_order", name);
            fortran = !strcmp(word, "True");
            have_order = 1;
        } else if (!strcmp(key, "shape") && !have_shape) {
            if (read_shape(&c, dims, &nd)) return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: malformed .npy shape", name);
            have_shape = 1;
        } else
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: unexpected or repeated .npy header key '%s'", name, key);
        if (!eat(&c, ',')) {
            if (eat(&c, '}')) break;
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: malformed .npy header dict", name);
        }
    }
    /* The rest of the header is padding: spaces and a final newline. */
    for (const char *q = c.p; q < c.end; q++)
        if (*q != ' ' && *q != '\n' && *q != '\0')
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: trailing garbage in the .npy header", name);
    if (!have_descr || !have_order || !have_shape)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: .npy header lacks descr, fortran_order or shape", name);
    size_t esize;
    if (!strcmp(descr, "<f4") || !strcmp(descr, "=f4")) esize = 4;
    else if (!strcmp(descr, "<f2") || !strcmp(descr, "=f2")) esize = 2;
    else
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: dtype '%s' not accepted: features must be little-endian float32 (<f4) or float16 (<f2)",
                            name, descr);
    if (fortran) return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: Fortran-ordered arrays are not accepted (use C order)", name);
    if (nd != 2) return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: expected a rank-2 array [frames, features], got rank %d", name, nd);
    if (dims[1] == 0 || dims[1] > 65536)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: %lld features per frame is not in [1, 65536]", name, dims[1]);
    if (expect_cols > 0 && dims[1] != expect_cols)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s: %lld features per frame, the model expects %d", name, dims[1], expect_cols);
    if (dims[0] > INT32_MAX || (max_rows > 0 && dims[0] > max_rows))
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: %lld frames, more than the limit of %d", name, dims[0],
                            max_rows > 0 ? max_rows : INT32_MAX);
    size_t numel = (size_t)dims[0] * (size_t)dims[1], dstart = hstart + hlen;
    if (numel > (SIZE_MAX - dstart) / esize)
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: array too large", name);
    if (len - dstart < numel * esize)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: truncated .npy data: %zu bytes for [%lld, %lld] need %zu", name,
                            len - dstart, dims[0], dims[1], numel * esize);
    if (len - dstart > numel * esize)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: %zu bytes of trailing data after the array", name,
                            len - dstart - numel * esize);
    float *data = NULL;
    if (numel) {
        data = malloc(numel * sizeof *data);
        if (!data) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory for %zu values", name, numel);
        const unsigned char *p = buf + dstart;
        for (size_t i = 0; i < numel; i++) {
            float v;
            if (esize == 4) memcpy(&v, p + 4 * i, 4);
            else v = rnnt_half_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
            if (!isfinite(v)) {
                free(data);
                return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s: non-finite value (%s) at frame %zu, feature %zu", name,
                                    isnan(v) ? "NaN" : "Inf", i / (size_t)dims[1], i % (size_t)dims[1]);
            }
            data[i] = v;
        }
    }
    out->rows = (int)dims[0];
    out->cols = (int)dims[1];
    out->data = data;
    return RNNT_OK;
}

rnnt_status rnnt_npy_load(const char *path, int expect_cols, int max_rows, size_t max_bytes, rnnt_npy *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!max_bytes) max_bytes = (size_t)2 << 30;
    FILE *f = fopen(path, "rb");
    if (!f) return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END)) {
        fclose(f);
        return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: not a regular file", path);
    }
    long sz = ftell(f);
    rewind(f);
    if (sz < 0) {
        fclose(f);
        return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: cannot size the file", path);
    }
    if ((size_t)sz > max_bytes) {
        fclose(f);
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: %ld bytes, more than the limit of %zu", path, sz, max_bytes);
    }
    unsigned char *buf = malloc(sz ? (size_t)sz : 1);
    if (!buf) {
        fclose(f);
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    rnnt_status st = got != (size_t)sz ? rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: short read", path)
                                       : rnnt_npy_parse_mem(path, buf, got, expect_cols, max_rows, out, err, errlen);
    free(buf);
    return st;
}

void rnnt_npy_free(rnnt_npy *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
