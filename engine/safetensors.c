/* safetensors.c — see safetensors.h. */
#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtype.h"
#include "status.h"

static const struct {
    const char *name;
    rnnt_st_dtype dtype;
    size_t size;
} dtypes[] = {
    {"F32", RNNT_ST_F32, 4}, {"F16", RNNT_ST_F16, 2}, {"BF16", RNNT_ST_BF16, 2},
    {"I32", RNNT_ST_I32, 4}, {"I64", RNNT_ST_I64, 8},
};

const char *rnnt_st_dtype_name(rnnt_st_dtype d)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == d) return dtypes[i].name;
    return "?";
}

void rnnt_st_close(rnnt_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->buf);
    free(f->path);
    free(f->metadata_json);
    memset(f, 0, sizeof *f);
}

static int cmp_begin(const void *a, const void *b)
{
    const rnnt_st_tensor *x = *(rnnt_st_tensor *const *)a, *y = *(rnnt_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end < y->end ? -1 : x->end > y->end);
}

/* One header entry -> tensor, with every field checked. */
static rnnt_status parse_entry(const char *path, const char *name, json_t *v, size_t data_size, rnnt_st_tensor *t,
                               char *err, size_t errlen)
{
    if (!json_is_object(v))
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", path, name);
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': unknown header field '%s'", path, name, key);
    }
    json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"), *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt))
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': missing or non-string dtype", path, name);
    size_t i, esize = 0;
    for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtypes[i].name, json_string_value(dt))) {
            t->dtype = dtypes[i].dtype;
            esize = dtypes[i].size;
        }
    if (!esize)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': unsupported dtype '%.16s' (F32, F16, BF16, I32, I64)",
                            path, name, json_string_value(dt));
    if (!json_is_array(shape) || json_array_size(shape) > RNNT_ST_MAX_DIMS)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': shape must be an array of at most %d integers", path,
                            name, RNNT_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    uint64_t numel = 1;
    for (i = 0; i < json_array_size(shape); i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1LL << 40))
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer", path,
                                name, i);
        t->shape[i] = json_integer_value(d);
        if (t->shape[i] && numel > (UINT64_MAX >> 4) / (uint64_t)t->shape[i])
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': shape overflows", path, name);
        numel *= (uint64_t)t->shape[i];
    }
    if (numel > data_size)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': shape needs more bytes than the file has", path, name);
    t->numel = (int64_t)numel;
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)))
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': data_offsets must be [begin, end]", path, name);
    json_int_t b = json_integer_value(json_array_get(offs, 0)), e = json_integer_value(json_array_get(offs, 1));
    if (b < 0 || e < b || (uint64_t)e > data_size)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets [%lld, %lld] lie outside the data area of %zu bytes (truncated file?)",
                            path, name, (long long)b, (long long)e, data_size);
    if ((uint64_t)(e - b) != numel * esize)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s': %lld bytes for %llu %s values (shape and offsets disagree)",
                            path, name, (long long)(e - b), (unsigned long long)numel, json_string_value(dt));
    t->begin = (size_t)b;
    t->end = (size_t)e;
    return RNNT_OK;
}

rnnt_status rnnt_st_parse(const char *path, unsigned char *buf, size_t size, rnnt_st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->buf = buf;
    f->size = size;
    f->path = strdup(path);
    if (!f->path) { rnnt_st_close(f); return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path); }
    rnnt_status st = RNNT_OK;
    json_t *root = NULL;
    rnnt_st_tensor **order = NULL;
    if (size < 8) { st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: %zu bytes, too short for a safetensors header", path, size); goto out; }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen < 2 || hlen > RNNT_ST_MAX_HEADER) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: header length %llu is not in [2, %u]", path, (unsigned long long)hlen, RNNT_ST_MAX_HEADER);
        goto out;
    }
    if (hlen > size - 8) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: header length %llu runs past the end of the %zu-byte file (truncated?)", path,
                          (unsigned long long)hlen, size);
        goto out;
    }
    f->data_start = 8 + (size_t)hlen;
    size_t data_size = size - f->data_start;
    json_error_t je;
    root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: header is not valid JSON at byte %d: %s", path, je.position, je.text);
        goto out;
    }
    if (!json_is_object(root)) { st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: header is not a JSON object", path); goto out; }
    size_t cap = json_object_size(root);
    f->tensors = calloc(cap ? cap : 1, sizeof *f->tensors);
    if (!f->tensors) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path); goto out; }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) { st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: __metadata__ is not an object", path); goto out; }
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: __metadata__ value '%s' is not a string", path, mk);
                    goto out;
                }
            }
            f->metadata_json = json_dumps(v, JSON_COMPACT);
            continue;
        }
        if (!*key || strlen(key) > 256) { st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: a tensor name is empty or too long", path); goto out; }
        rnnt_st_tensor *t = &f->tensors[f->n];
        if ((st = parse_entry(path, key, v, data_size, t, err, errlen))) goto out;
        if (!(t->name = strdup(key))) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path); goto out; }
        f->n++;
    }
    /* The tensors must tile the data area exactly: sorted by offset, each begins where the last ended. */
    order = malloc((f->n ? f->n : 1) * sizeof *order);
    if (!order) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path); goto out; }
    for (int i = 0; i < f->n; i++) order[i] = &f->tensors[i];
    qsort(order, f->n, sizeof *order, cmp_begin);
    size_t pos = 0;
    for (int i = 0; i < f->n; i++) {
        if (order[i]->begin < pos) {
            st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s' overlaps another tensor's data", path, order[i]->name);
            goto out;
        }
        if (order[i]->begin > pos) {
            st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: %zu unaccounted bytes before tensor '%s'", path, order[i]->begin - pos,
                              order[i]->name);
            goto out;
        }
        pos = order[i]->end;
    }
    if (pos != data_size)
        st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: the data area has %zu bytes but the tensors cover %zu", path, data_size, pos);
out:
    free(order);
    json_decref(root);
    if (st) rnnt_st_close(f);
    return st;
}

rnnt_status rnnt_st_open(const char *path, rnnt_st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp) return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(fp), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(fp);
        return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(fp);
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, size);
    }
    size_t got = fread(buf, 1, size, fp);
    fclose(fp);
    if (got != size) {
        free(buf);
        return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: short read (%zu of %zu bytes)", path, got, size);
    }
    return rnnt_st_parse(path, buf, size, f, err, errlen);
}

const rnnt_st_tensor *rnnt_st_find(const rnnt_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

rnnt_status rnnt_st_read_f32(const rnnt_st_file *f, const rnnt_st_tensor *t, float *dst, char *err, size_t errlen)
{
    const unsigned char *p = f->buf + f->data_start + t->begin;
    for (int64_t i = 0; i < t->numel; i++) {
        float v;
        switch (t->dtype) {
        case RNNT_ST_F32: memcpy(&v, p + 4 * i, 4); break;
        case RNNT_ST_F16: v = rnnt_half_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
        case RNNT_ST_BF16: v = rnnt_bf16_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
        default:
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s' has dtype %s, expected F32, F16 or BF16", f->path,
                                t->name, rnnt_st_dtype_name(t->dtype));
        }
        if (!isfinite(v))
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s' has a non-finite value (%s) at flat index %lld", f->path,
                                t->name, isnan(v) ? "NaN" : "Inf", (long long)i);
        dst[i] = v;
    }
    return RNNT_OK;
}

rnnt_status rnnt_st_read_i32(const rnnt_st_file *f, const rnnt_st_tensor *t, int32_t *dst, char *err, size_t errlen)
{
    const unsigned char *p = f->buf + f->data_start + t->begin;
    for (int64_t i = 0; i < t->numel; i++) {
        if (t->dtype == RNNT_ST_I32) memcpy(&dst[i], p + 4 * i, 4);
        else if (t->dtype == RNNT_ST_I64) {
            int64_t v;
            memcpy(&v, p + 8 * i, 8);
            if (v < INT32_MIN || v > INT32_MAX)
                return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s' value out of int32 range", f->path, t->name);
            dst[i] = (int32_t)v;
        } else
            return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s' has dtype %s, expected I32 or I64", f->path, t->name,
                                rnnt_st_dtype_name(t->dtype));
    }
    return RNNT_OK;
}

char *rnnt_st_metadata(const rnnt_st_file *f, const char *key)
{
    if (!f->metadata_json) return NULL;
    json_t *m = json_loads(f->metadata_json, 0, NULL);
    char *r = NULL;
    if (m && json_is_string(json_object_get(m, key))) r = strdup(json_string_value(json_object_get(m, key)));
    json_decref(m);
    return r;
}
