/* body.c — JSON and .npy request bodies. */
#include "body.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "audio_body.h"
#include "rnnt_npy.h"

void req_opts_default(req_opts *o) { o->timestamps = 1; }

/* Exactly the spelling of an OpenAPI boolean (server/openapi.yaml): "1", "0", an empty value and a
 * bare name are refused, so the spec and the server accept the same requests. */
static int parse_bool(const char *v, int *out)
{
    if (v && !strcmp(v, "true")) *out = 1;
    else if (v && !strcmp(v, "false")) *out = 0;
    else return -1;
    return 0;
}

int body_query_param(const char *key, const char *value, req_opts *o, srv_err *e)
{
    if (strcmp(key, "timestamps") == 0) {
        if (parse_bool(value, &o->timestamps) == 0) return 0;
        srv_err_set(e, 400, "invalid_parameter", "query parameter timestamps: expected true or false");
        return -1;
    }
    srv_err_set(e, 400, "invalid_parameter", "unknown query parameter '%.64s'", key);
    return -1;
}

/* One pass over the raw text before jansson sees it: rejects nesting deeper than
 * BODY_MAX_JSON_DEPTH and counts the commas outside strings, which bounds the number of values
 * (so the parsed tree, ~50 bytes a value, stays proportional to max_frames, not to the body). */
static int prescan(const char *s, size_t n, size_t max_commas, srv_err *e)
{
    int depth = 0, in_str = 0, esc = 0;
    size_t commas = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
            continue;
        }
        switch (c) {
        case '"': in_str = 1; break;
        case '[':
        case '{':
            if (++depth > BODY_MAX_JSON_DEPTH) {
                srv_err_set(e, 400, "invalid_json", "JSON nested deeper than %d levels",
                            BODY_MAX_JSON_DEPTH);
                return -1;
            }
            break;
        case ']':
        case '}': depth--; break;
        case ',':
            if (++commas > max_commas) {
                srv_err_set(e, 413, "too_many_frames",
                            "the features hold more values than limits.max_frames allows");
                return -1;
            }
            break;
        default: break;
        }
    }
    return 0;
}

/* ---- JSON bodies: one pass over the text, numbers straight into the float array ----
 * The document is checked as strictly as jansson checks it (RFC 8259 grammar, UTF-8, escapes,
 * \u0000 and lone surrogates refused, numbers beyond double range refused, duplicate keys of the
 * top-level object refused) but no tree is built: a 14 MB body used to become ~25 MB of small
 * jansson nodes per request, which the allocator kept after the request (issue 11, defect 5).
 * Errors are reported in the order the tree-based parser found them: syntax first, then the keys,
 * then the features (their count, then row by row: not an array, its width, a non-number, a value
 * beyond float range). */

#define JP_MAX_NUMBER 1024 /* characters in one number token */
#define JP_MAX_KEYS 64     /* top-level keys checked for duplicates */
#define JP_KEY_MAX 64

typedef struct {
    const char *start, *p, *end;
    int dim, max_frames;
    float *out;
    size_t cap;     /* floats in out */
    size_t rows;    /* rows of "features" seen */
    int syntax;     /* a syntax error is in e */
    srv_err *e;
    srv_err key_err, row_err, feat_err;
    int have_features, features_array;
    int timestamps; /* -1 not given */
    char keys[JP_MAX_KEYS][JP_KEY_MAX + 1];
    int n_keys;
} jparse;

static int jp_syntax(jparse *j, const char *at, const char *what)
{
    if (j->syntax) return -1;
    int line = 1, col = 1;
    for (const char *q = j->start; q < at && q < j->end; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    srv_err_set(j->e, 400, "invalid_json", "invalid JSON at line %d, column %d: %s", line, col, what);
    j->syntax = 1;
    return -1;
}

static void jp_ws(jparse *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int jp_hex4(jparse *j, const char *q, unsigned *out)
{
    if (j->end - q < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(q[i]);
        if (h < 0) return -1;
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return 0;
}

/* A string at j->p (the opening quote). Decodes into key (if not NULL, up to JP_KEY_MAX bytes;
 * *klen gets the full decoded length). */
static int jp_string(jparse *j, char *key, size_t *klen)
{
    const char *q = j->p + 1;
    size_t kl = 0;
#define PUT(c)                                                                                               \
    do {                                                                                                     \
        if (key && kl < JP_KEY_MAX) key[kl] = (char)(c);                                                     \
        kl++;                                                                                                \
    } while (0)
    for (;;) {
        if (q >= j->end) return jp_syntax(j, q, "premature end of input in a string");
        unsigned char c = (unsigned char)*q;
        if (c == '"') break;
        if (c < 0x20) return jp_syntax(j, q, "control character in a string");
        if (c == '\\') {
            if (q + 1 >= j->end) return jp_syntax(j, q, "premature end of input in a string");
            char x = q[1];
            const char *simple = strchr("\"\\/bfnrt", x);
            if (x && simple) {
                static const char map[] = "\"\\/\b\f\n\r\t";
                PUT(map[simple - "\"\\/bfnrt"]);
                q += 2;
                continue;
            }
            if (x != 'u') return jp_syntax(j, q, "invalid escape");
            unsigned u;
            if (jp_hex4(j, q + 2, &u)) return jp_syntax(j, q, "invalid \\u escape");
            q += 6;
            if (u == 0) return jp_syntax(j, q - 6, "\\u0000 is not allowed");
            if (u >= 0xDC00 && u <= 0xDFFF) return jp_syntax(j, q - 6, "invalid Unicode escape (lone low surrogate)");
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned lo;
                if (j->end - q < 6 || q[0] != '\\' || q[1] != 'u' || jp_hex4(j, q + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return jp_syntax(j, q - 6, "invalid Unicode escape (lone high surrogate)");
                q += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (u < 0x80) PUT(u);
            else if (u < 0x800) { PUT(0xC0 | (u >> 6)); PUT(0x80 | (u & 0x3F)); }
            else if (u < 0x10000) { PUT(0xE0 | (u >> 12)); PUT(0x80 | ((u >> 6) & 0x3F)); PUT(0x80 | (u & 0x3F)); }
            else { PUT(0xF0 | (u >> 18)); PUT(0x80 | ((u >> 12) & 0x3F)); PUT(0x80 | ((u >> 6) & 0x3F)); PUT(0x80 | (u & 0x3F)); }
            continue;
        }
        if (c < 0x80) {
            PUT(c);
            q++;
            continue;
        }
        /* UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
        int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!n || j->end - q < n) return jp_syntax(j, q, "invalid UTF-8 in a string");
        unsigned cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
        for (int i = 1; i < n; i++) {
            unsigned char cc = (unsigned char)q[i];
            if ((cc & 0xC0) != 0x80) return jp_syntax(j, q, "invalid UTF-8 in a string");
            cp = (cp << 6) | (cc & 0x3F);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return jp_syntax(j, q, "invalid UTF-8 in a string");
        for (int i = 0; i < n; i++) PUT(q[i]);
        q += n;
    }
#undef PUT
    j->p = q + 1;
    if (key) key[kl < JP_KEY_MAX ? kl : JP_KEY_MAX] = '\0';
    if (klen) *klen = kl;
    return 0;
}

/* A number at j->p: the JSON grammar, then strtoll (integers) or strtod (reals) as jansson does, so
 * the same text gives the same double; out of range is a syntax error as there. */
static int jp_number(jparse *j, double *out)
{
    const char *q = j->p, *b = q;
    int real = 0;
    if (q < j->end && *q == '-') q++;
    if (q >= j->end || *q < '0' || *q > '9') return jp_syntax(j, b, "invalid token");
    if (*q == '0') q++;
    else while (q < j->end && *q >= '0' && *q <= '9') q++;
    if (q < j->end && *q == '.') {
        real = 1;
        q++;
        if (q >= j->end || *q < '0' || *q > '9') return jp_syntax(j, b, "invalid number");
        while (q < j->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < j->end && (*q == 'e' || *q == 'E')) {
        real = 1;
        q++;
        if (q < j->end && (*q == '+' || *q == '-')) q++;
        if (q >= j->end || *q < '0' || *q > '9') return jp_syntax(j, b, "invalid number");
        while (q < j->end && *q >= '0' && *q <= '9') q++;
    }
    size_t n = (size_t)(q - b);
    if (n > JP_MAX_NUMBER) return jp_syntax(j, b, "number too long");
    char buf[JP_MAX_NUMBER + 1];
    memcpy(buf, b, n);
    buf[n] = '\0';
    errno = 0;
    if (real) {
        double v = strtod(buf, NULL);
        if ((v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE) return jp_syntax(j, b, "real number overflow");
        *out = v;
    } else {
        long long v = strtoll(buf, NULL, 10);
        if (errno == ERANGE) return jp_syntax(j, b, "integer out of range");
        *out = (double)v;
    }
    j->p = q;
    return 0;
}

static int jp_value(jparse *j, int depth);

static int jp_literal(jparse *j, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n)) return jp_syntax(j, j->p, "invalid token");
    j->p += n;
    return 0;
}

/* Elements of an array at j->p ('['), each handed to fn (which consumes it). */
typedef int (*jp_elem_fn)(jparse *j, size_t index, void *ctx, int depth);

static int jp_array(jparse *j, int depth, jp_elem_fn fn, void *ctx, size_t *count)
{
    if (depth > BODY_MAX_JSON_DEPTH) return jp_syntax(j, j->p, "nested too deep");
    j->p++;
    size_t i = 0;
    jp_ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        if (count) *count = 0;
        return 0;
    }
    for (;;) {
        jp_ws(j);
        if (j->p >= j->end) return jp_syntax(j, j->p, "premature end of input in an array");
        if ((fn ? fn(j, i, ctx, depth + 1) : jp_value(j, depth + 1))) return -1;
        i++;
        jp_ws(j);
        if (j->p >= j->end) return jp_syntax(j, j->p, "premature end of input in an array");
        if (*j->p == ']') {
            j->p++;
            break;
        }
        if (*j->p != ',') return jp_syntax(j, j->p, "',' or ']' expected");
        j->p++;
    }
    if (count) *count = i;
    return 0;
}

/* An object's members; key_fn (if any) consumes each value. */
typedef int (*jp_member_fn)(jparse *j, const char *key, size_t klen, int depth);

static int jp_object(jparse *j, int depth, jp_member_fn fn)
{
    if (depth > BODY_MAX_JSON_DEPTH) return jp_syntax(j, j->p, "nested too deep");
    j->p++;
    jp_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return 0;
    }
    for (;;) {
        jp_ws(j);
        if (j->p >= j->end || *j->p != '"') return jp_syntax(j, j->p, "string or '}' expected");
        char key[JP_KEY_MAX + 1];
        size_t kl;
        const char *kat = j->p;
        if (jp_string(j, key, &kl)) return -1;
        if (fn && kl <= JP_KEY_MAX) {
            if (memchr(key, '\0', kl)) return jp_syntax(j, kat, "NUL in a key");
            for (int k = 0; k < j->n_keys; k++)
                if (!strcmp(j->keys[k], key)) return jp_syntax(j, kat, "duplicate object key");
            if (j->n_keys < JP_MAX_KEYS) memcpy(j->keys[j->n_keys++], key, kl + 1);
        }
        jp_ws(j);
        if (j->p >= j->end || *j->p != ':') return jp_syntax(j, j->p, "':' expected");
        j->p++;
        jp_ws(j);
        if (j->p >= j->end) return jp_syntax(j, j->p, "premature end of input in an object");
        if (fn ? fn(j, kl <= JP_KEY_MAX ? key : "", kl, depth + 1) : jp_value(j, depth + 1)) return -1;
        jp_ws(j);
        if (j->p >= j->end) return jp_syntax(j, j->p, "premature end of input in an object");
        if (*j->p == '}') {
            j->p++;
            return 0;
        }
        if (*j->p != ',') return jp_syntax(j, j->p, "',' or '}' expected");
        j->p++;
    }
}

/* Any value, checked and skipped. */
static int jp_value(jparse *j, int depth)
{
    double d;
    switch (*j->p) {
    case '{': return jp_object(j, depth, NULL);
    case '[': return jp_array(j, depth, NULL, NULL, NULL);
    case '"': return jp_string(j, NULL, NULL);
    case 't': return jp_literal(j, "true");
    case 'f': return jp_literal(j, "false");
    case 'n': return jp_literal(j, "null");
    default: return jp_number(j, &d);
    }
}

typedef struct {
    size_t t;      /* row index */
    size_t bad;    /* first element that is not a number or not a finite float32, or SIZE_MAX */
    int bad_type;  /* 1: that element is not a number */
    double bad_v;
} jp_row;

static int jp_row_elem(jparse *j, size_t f, void *ctx, int depth)
{
    jp_row *r = ctx;
    char c = *j->p;
    if (c != '-' && (c < '0' || c > '9')) {
        if (r->bad == SIZE_MAX) {
            r->bad = f;
            r->bad_type = 1;
        }
        return jp_value(j, depth);
    }
    double v;
    if (jp_number(j, &v)) return -1;
    float fv = (float)v;
    /* The spec's bound, exactly: a double a little above FLT_MAX would round down to it. */
    if (!(v >= -FLT_MAX && v <= FLT_MAX)) {
        if (r->bad == SIZE_MAX) {
            r->bad = f;
            r->bad_v = v;
        }
        return 0;
    }
    size_t at = r->t * (size_t)j->dim + f;
    if (f < (size_t)j->dim && at < j->cap) j->out[at] = fv;
    return 0;
}

static int jp_feature_row(jparse *j, size_t t, void *ctx, int depth)
{
    (void)ctx;
    j->rows = t + 1;
    int first = !j->row_err.status;
    if (*j->p != '[') {
        if (first) srv_err_set(&j->row_err, 400, "invalid_request", "features[%zu] is not an array of numbers", t);
        return jp_value(j, depth);
    }
    jp_row r = {t, SIZE_MAX, 0, 0};
    size_t width;
    if (jp_array(j, depth, jp_row_elem, &r, &width)) return -1;
    if (!first) return 0;
    if (width != (size_t)j->dim)
        srv_err_set(&j->row_err, 422, "wrong_feature_dim", "features[%zu] has %zu values, the model expects %d per frame",
                    t, width, j->dim);
    else if (r.bad != SIZE_MAX && r.bad_type)
        srv_err_set(&j->row_err, 400, "invalid_request", "features[%zu][%zu] is not a number", t, r.bad);
    else if (r.bad != SIZE_MAX)
        srv_err_set(&j->row_err, 422, "non_finite_feature", "features[%zu][%zu] = %g is not a finite float32", t,
                    r.bad, r.bad_v);
    return 0;
}

static int jp_member(jparse *j, const char *key, size_t klen, int depth)
{
    if (klen == 8 && !strcmp(key, "features")) {
        j->have_features = 1;
        if (*j->p != '[') return jp_value(j, depth);
        j->features_array = 1;
        return jp_array(j, depth, jp_feature_row, NULL, NULL);
    }
    if (klen == 10 && !strcmp(key, "timestamps")) {
        if (*j->p == 't' || *j->p == 'f') {
            int t = *j->p == 't';
            if (jp_literal(j, t ? "true" : "false")) return -1;
            if (!j->key_err.status) j->timestamps = t;
            return 0;
        }
        if (!j->key_err.status) srv_err_set(&j->key_err, 400, "invalid_request", "\"timestamps\" must be true or false");
        return jp_value(j, depth);
    }
    if (!j->key_err.status)
        srv_err_set(&j->key_err, 400, "invalid_request", "unknown key \"%.64s\" (allowed: features, timestamps)", key);
    return jp_value(j, depth);
}

int body_parse_json(const char *buf, size_t len, int dim, int max_frames, body_feats *out, req_opts *o,
                    srv_err *e)
{
    out->data = NULL;
    out->frames = 0;
    size_t max_commas = (size_t)max_frames * (size_t)dim + 64;
    if (prescan(buf, len, max_commas, e)) return -1;
    jparse *j = calloc(1, sizeof *j);
    if (!j) {
        srv_err_set(e, 503, "out_of_memory", "no memory to parse the body");
        return -1;
    }
    j->start = j->p = buf;
    j->end = buf + len;
    j->dim = dim;
    j->max_frames = max_frames;
    j->e = e;
    j->timestamps = -1;
    /* Room for every value the text can hold (commas + 1, as counted by prescan), at most max_frames rows. */
    size_t commas = 0;
    for (size_t i = 0; i < len; i++) commas += buf[i] == ',';
    size_t want = commas + 1, most = (size_t)max_frames * (size_t)dim;
    j->cap = want < most ? want : most;
    j->out = malloc((j->cap ? j->cap : 1) * sizeof *j->out);
    int rc = -1;
    if (!j->out) {
        srv_err_set(e, 503, "out_of_memory", "no memory for the features");
        goto done;
    }
    jp_ws(j);
    if (j->p >= j->end) {
        jp_syntax(j, j->p, "'[' or '{' expected near end of file");
        goto done;
    }
    if (*j->p == '{') {
        if (jp_object(j, 1, jp_member)) goto done;
    } else if (*j->p == '[') {
        if (jp_array(j, 1, NULL, NULL, NULL)) goto done;
        srv_err_set(&j->key_err, 400, "invalid_request", "the body must be a JSON object with \"features\"");
    } else {
        jp_syntax(j, j->p, "'[' or '{' expected");
        goto done;
    }
    jp_ws(j);
    if (j->p != j->end) {
        jp_syntax(j, j->p, "end of file expected");
        goto done;
    }
    if (j->key_err.status) {
        *e = j->key_err;
        goto done;
    }
    if (!j->have_features) {
        srv_err_set(e, 400, "invalid_request", "missing \"features\": [[%d floats], ...]", dim);
        goto done;
    }
    if (!j->features_array) {
        srv_err_set(e, 400, "invalid_request", "\"features\" must be an array of frames");
        goto done;
    }
    if (j->rows > (size_t)max_frames) {
        srv_err_set(e, 413, "too_many_frames", "%zu frames, more than limits.max_frames = %d", j->rows, max_frames);
        goto done;
    }
    if (j->row_err.status) {
        *e = j->row_err;
        goto done;
    }
    if (j->timestamps >= 0) o->timestamps = j->timestamps;
    if (j->rows > 0) {
        size_t n = j->rows * (size_t)dim;
        float *shrunk = n < j->cap ? realloc(j->out, n * sizeof *j->out) : NULL;
        out->data = shrunk ? shrunk : j->out;
        j->out = NULL;
    }
    out->frames = (int)j->rows;
    rc = 0;
done:
    free(j->out);
    free(j);
    return rc;
}

int body_parse_npy(const char *buf, size_t len, int dim, int max_frames, body_feats *out, srv_err *e)
{
    out->data = NULL;
    out->frames = 0;
    rnnt_npy a = {0};
    char msg[256];
    rnnt_status st = rnnt_npy_parse_mem("body", buf, len, dim, max_frames, &a, msg, sizeof msg);
    switch (st) {
    case RNNT_OK:
        out->data = a.data;
        out->frames = a.rows;
        return 0;
    case RNNT_ERR_INVALID:
        /* The reader says INVALID for a wrong width or a non-finite value; both are 422. */
        srv_err_set(e, 422, strstr(msg, "non-finite") ? "non_finite_feature" : "wrong_feature_dim", "%s",
                    msg);
        break;
    case RNNT_ERR_TOO_LARGE: srv_err_set(e, 413, "too_many_frames", "%s", msg); break;
    case RNNT_ERR_NOMEM: srv_err_set(e, 503, "out_of_memory", "%s", msg); break;
    default: srv_err_set(e, 400, "invalid_npy", "%s", msg); break;
    }
    rnnt_npy_free(&a);
    return -1;
}

req_ctype body_media_type(const char *ct)
{
    if (!ct) return CT_NONE;
    while (*ct == ' ') ct++;
    size_t n = strcspn(ct, "; \t");
    if (n == strlen("application/json") && strncasecmp(ct, "application/json", n) == 0) return CT_JSON;
    if (n == strlen("application/x-npy") && strncasecmp(ct, "application/x-npy", n) == 0) return CT_NPY;
    if (n == strlen("application/octet-stream") && strncasecmp(ct, "application/octet-stream", n) == 0) return CT_OCTET;
    if (n == strlen("multipart/form-data") && strncasecmp(ct, "multipart/form-data", n) == 0) return CT_MULTIPART;
    if (audio_body_is_audio_type(ct)) return CT_AUDIO;
    return CT_NONE;
}

/* Percent-decodes src[0..n) into dst (at least n + 1 bytes), '+' as space; -1 on a bad escape. */
static int url_decode(char *dst, const char *src, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = src[i];
        if (ch == '+') {
            ch = ' ';
        } else if (ch == '%') {
            int v = 0;
            for (int j = 1; j <= 2; j++) {
                char h = i + (size_t)j < n ? src[i + (size_t)j] : '\0';
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) return -1;
                v = v * 16 + d;
            }
            if (v == 0) return -1;
            ch = (char)v;
            i += 2;
        }
        dst[k++] = ch;
    }
    dst[k] = '\0';
    return 0;
}

int body_parse_query(const char *query, req_opts *o, srv_err *e)
{
    const char *p = query;
    while (*p) {
        size_t n = strcspn(p, "&");
        if (n > 0) {
            char key[128], val[256];
            size_t kn = strcspn(p, "=");
            int has_val = kn < n;
            if (!has_val) kn = n;
            size_t vn = has_val ? n - kn - 1 : 0;
            if (kn >= sizeof key || vn >= sizeof val || url_decode(key, p, kn) ||
                (has_val && url_decode(val, p + kn + 1, vn))) {
                srv_err_set(e, 400, "invalid_parameter", "malformed query string");
                return -1;
            }
            if (body_query_param(key, has_val ? val : NULL, o, e)) return -1;
        }
        p += n;
        if (*p == '&') p++;
    }
    return 0;
}
