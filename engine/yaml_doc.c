/* yaml_doc.c — see yaml_doc.h. Built on libyaml's document loader; nodes carry their marks, which is
 * where every message's line and column come from. */
#include "yaml_doc.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "status.h"

static rnnt_status syntax_error(ydoc *y, const yaml_parser_t *p)
{
    return rnnt_set_err(y->err, y->errlen, RNNT_ERR_FORMAT, "%s:%zu:%zu: YAML syntax error: %s%s%s", y->path,
                        p->problem_mark.line + 1, p->problem_mark.column + 1, p->problem ? p->problem : "unknown problem",
                        p->context ? " " : "", p->context ? p->context : "");
}

static rnnt_status load_buffer(ydoc *y, const char *name, const unsigned char *text, size_t len, unsigned flags)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return rnnt_set_err(y->err, y->errlen, RNNT_ERR_NOMEM, "%s: cannot start the YAML parser", name);
    yaml_parser_set_input_string(&p, text, len);
    rnnt_status st = RNNT_OK;
    if (!yaml_parser_load(&p, &y->doc)) {
        st = syntax_error(y, &p);
    } else {
        y->loaded = 1;
        yaml_node_t *root = yaml_document_get_root_node(&y->doc);
        if (!root && !(flags & YDOC_EMPTY_OK))
            st = rnnt_set_err(y->err, y->errlen, RNNT_ERR_FORMAT, "%s:1:1: the file is empty", name);
        else if (root && root->type != YAML_MAPPING_NODE && !(flags & YDOC_ANY_ROOT))
            st = ydoc_error(y, root, RNNT_ERR_FORMAT, "the top level must be a mapping of keys");
    }
    if (st == RNNT_OK && (flags & YDOC_ONE_DOC)) {
        /* A second document (after ---) is an error, not silently ignored. */
        yaml_document_t doc2;
        if (!yaml_parser_load(&p, &doc2)) {
            st = syntax_error(y, &p);
        } else {
            yaml_node_t *r2 = yaml_document_get_root_node(&doc2);
            if (r2) st = ydoc_error(y, r2, RNNT_ERR_FORMAT, "only one YAML document is allowed");
            yaml_document_delete(&doc2);
        }
    }
    yaml_parser_delete(&p);
    return st;
}

rnnt_status ydoc_load_mem_flags(ydoc *y, const char *name, const char *text, size_t len, unsigned flags, char *err,
                                size_t errlen)
{
    memset(y, 0, sizeof *y);
    y->path = name;
    y->err = err;
    y->errlen = errlen;
    if (len > YDOC_MAX_FILE_BYTES)
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: larger than %u bytes", name, YDOC_MAX_FILE_BYTES);
    if (memchr(text, '\0', len))
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: contains a NUL byte", name);
    return load_buffer(y, name, (const unsigned char *)text, len, flags);
}

rnnt_status ydoc_load_mem(ydoc *y, const char *name, const char *text, size_t len, char *err, size_t errlen)
{
    return ydoc_load_mem_flags(y, name, text, len, 0, err, errlen);
}

rnnt_status ydoc_load_flags(ydoc *y, const char *path, unsigned flags, char *err, size_t errlen)
{
    memset(y, 0, sizeof *y);
    y->path = path;
    y->err = err;
    y->errlen = errlen;
    FILE *f = fopen(path, "rb");
    if (!f) return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(YDOC_MAX_FILE_BYTES + 1);
    if (!buf) {
        fclose(f);
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, YDOC_MAX_FILE_BYTES + 1, f);
    int bad = ferror(f);
    fclose(f);
    rnnt_status st;
    if (bad) st = rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: read error", path);
    else st = ydoc_load_mem_flags(y, path, buf, n, flags, err, errlen);
    free(buf);
    return st;
}

rnnt_status ydoc_load(ydoc *y, const char *path, char *err, size_t errlen)
{
    return ydoc_load_flags(y, path, 0, err, errlen);
}

void ydoc_free(ydoc *y)
{
    if (y->loaded) yaml_document_delete(&y->doc);
    y->loaded = 0;
}

yaml_node_t *ydoc_root(ydoc *y) { return y->loaded ? yaml_document_get_root_node(&y->doc) : NULL; }

rnnt_status ydoc_error(ydoc *y, const yaml_node_t *at, rnnt_status s, const char *fmt, ...)
{
    if (!y->err || !y->errlen) return s;
    int n = snprintf(y->err, y->errlen, "%s:%zu:%zu: ", y->path, at ? at->start_mark.line + 1 : 1,
                     at ? at->start_mark.column + 1 : 1);
    if (n >= 0 && (size_t)n < y->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(y->err + n, y->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return s;
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* "where.key" for messages. */
static const char *dotted(char *buf, size_t n, const char *where, const char *key)
{
    snprintf(buf, n, "%s%s%s", where && *where ? where : "", where && *where ? "." : "", key);
    return buf;
}

rnnt_status ydoc_check_keys(ydoc *y, yaml_node_t *map, const char *where, const char *const *allowed)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return ydoc_error(y, map, RNNT_ERR_FORMAT, "%s: expected a mapping of keys", where && *where ? where : "top level");
    char path[160];
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&y->doc, p->key);
        const char *ks = scalar(k);
        if (!ks) return ydoc_error(y, k, RNNT_ERR_FORMAT, "%s: a key must be a plain string", where && *where ? where : "top level");
        int known = 0;
        for (const char *const *a = allowed; *a; a++)
            if (!strcmp(*a, ks)) known = 1;
        if (!known) return ydoc_error(y, k, RNNT_ERR_FORMAT, "%s: unknown key", dotted(path, sizeof path, where, ks));
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            const char *qs = scalar(yaml_document_get_node(&y->doc, q->key));
            if (qs && !strcmp(qs, ks))
                return ydoc_error(y, k, RNNT_ERR_FORMAT, "%s: duplicate key", dotted(path, sizeof path, where, ks));
        }
    }
    return RNNT_OK;
}

yaml_node_t *ydoc_get(ydoc *y, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *ks = scalar(yaml_document_get_node(&y->doc, p->key));
        if (ks && !strcmp(ks, key)) return yaml_document_get_node(&y->doc, p->value);
    }
    return NULL;
}

int ydoc_parse_int(const char *s, long long *out)
{
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s) return -1;
    *out = v;
    return 0;
}

int ydoc_parse_double(const char *s, double *out)
{
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno == ERANGE || *end || end == s || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int ydoc_parse_bool(const char *s, int *out)
{
    if (!s) return -1;
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "yes") || !strcmp(s, "on")) *out = 1;
    else if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "no") || !strcmp(s, "off")) *out = 0;
    else return -1;
    return 0;
}

/* A plain (unquoted) scalar for numbers and booleans: "3" in quotes is a string, not a number. */
static const char *plain_scalar(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
        n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE)
        return NULL;
    return (const char *)n->data.scalar.value;
}

static yaml_node_t *lookup(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required,
                           rnnt_status *st)
{
    char path[160];
    *st = RNNT_OK;
    yaml_node_t *n = ydoc_get(y, map, key);
    if (!n && required)
        *st = ydoc_error(y, map, RNNT_ERR_FORMAT, "%s: required key is missing", dotted(path, sizeof path, where, key));
    return n;
}

rnnt_status ydoc_int(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required, long long lo,
                     long long hi, long long *out)
{
    rnnt_status st;
    yaml_node_t *n = lookup(y, map, where, key, required, &st);
    if (!n) return st;
    char path[160];
    long long v;
    const char *s = plain_scalar(n);
    if (ydoc_parse_int(s, &v))
        return ydoc_error(y, n, RNNT_ERR_FORMAT, "%s: expected an integer, got %s%s%s", dotted(path, sizeof path, where, key),
                          scalar(n) ? "'" : "a ", scalar(n) ? scalar(n) : (n->type == YAML_MAPPING_NODE ? "mapping" : "sequence"),
                          scalar(n) ? "'" : "");
    if (v < lo || v > hi)
        return ydoc_error(y, n, RNNT_ERR_FORMAT, "%s: %lld is out of range [%lld, %lld]", dotted(path, sizeof path, where, key), v, lo, hi);
    *out = v;
    return RNNT_OK;
}

rnnt_status ydoc_double(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required, double lo,
                        double hi, double *out)
{
    rnnt_status st;
    yaml_node_t *n = lookup(y, map, where, key, required, &st);
    if (!n) return st;
    char path[160];
    double v;
    const char *s = plain_scalar(n);
    if (ydoc_parse_double(s, &v))
        return ydoc_error(y, n, RNNT_ERR_FORMAT, "%s: expected a finite number, got %s%s%s", dotted(path, sizeof path, where, key),
                          scalar(n) ? "'" : "a ", scalar(n) ? scalar(n) : "collection", scalar(n) ? "'" : "");
    if (v < lo || v > hi)
        return ydoc_error(y, n, RNNT_ERR_FORMAT, "%s: %g is out of range [%g, %g]", dotted(path, sizeof path, where, key), v, lo, hi);
    *out = v;
    return RNNT_OK;
}

rnnt_status ydoc_bool(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required, int *out)
{
    rnnt_status st;
    yaml_node_t *n = lookup(y, map, where, key, required, &st);
    if (!n) return st;
    char path[160];
    if (ydoc_parse_bool(plain_scalar(n), out))
        return ydoc_error(y, n, RNNT_ERR_FORMAT, "%s: expected true or false", dotted(path, sizeof path, where, key));
    return RNNT_OK;
}

rnnt_status ydoc_str(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required,
                     const char *const *choices, char *out, size_t outlen)
{
    rnnt_status st;
    yaml_node_t *n = lookup(y, map, where, key, required, &st);
    if (!n) return st;
    char path[160];
    const char *s = scalar(n);
    if (!s) return ydoc_error(y, n, RNNT_ERR_FORMAT, "%s: expected a string", dotted(path, sizeof path, where, key));
    if (choices) {
        int ok = 0;
        char list[160] = "";
        for (const char *const *c = choices; *c; c++) {
            if (!strcmp(*c, s)) ok = 1;
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", c == choices ? "" : ", ", *c);
        }
        if (!ok)
            return ydoc_error(y, n, RNNT_ERR_FORMAT, "%s: '%.40s' is not one of: %s", dotted(path, sizeof path, where, key), s, list);
    }
    if (strlen(s) >= outlen)
        return ydoc_error(y, n, RNNT_ERR_FORMAT, "%s: longer than %zu characters", dotted(path, sizeof path, where, key), outlen - 1);
    memcpy(out, s, strlen(s) + 1);
    return RNNT_OK;
}
