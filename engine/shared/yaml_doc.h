/* yaml_doc.h — strict, schema-driven reading of small YAML files (model.yaml, the daemon config).
 * Every error is one line "FILE:LINE:COLUMN: KEY: what is wrong". Not thread-safe per context;
 * contexts are independent. */
#ifndef RNNT_YAML_DOC_H
#define RNNT_YAML_DOC_H

#include <stddef.h>
#include <yaml.h>

#include "rnnt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define YDOC_MAX_FILE_BYTES (1u << 20)

typedef struct {
    const char *path;     /* for messages */
    yaml_document_t doc;
    int loaded;
    char *err;
    size_t errlen;
} ydoc;

/* Reads and parses PATH (at most YDOC_MAX_FILE_BYTES). The root must be a mapping. */
rnnt_status ydoc_load(ydoc *y, const char *path, char *err, size_t errlen);
/* The same from memory (tests); `name` stands for the file name in messages. */
rnnt_status ydoc_load_mem(ydoc *y, const char *name, const char *text, size_t len, char *err,
                          size_t errlen);
/* The same with flags: YDOC_EMPTY_OK (an empty file has no root: ydoc_root is NULL), YDOC_ANY_ROOT
 * (the caller checks the root's type), YDOC_ONE_DOC (a second document after --- is an error). The
 * daemon config (server/cfg.c) reads rnntd.yaml with all three. */
#define YDOC_EMPTY_OK 1u
#define YDOC_ANY_ROOT 2u
#define YDOC_ONE_DOC 4u
rnnt_status ydoc_load_flags(ydoc *y, const char *path, unsigned flags, char *err, size_t errlen);
rnnt_status ydoc_load_mem_flags(ydoc *y, const char *name, const char *text, size_t len, unsigned flags, char *err,
                                size_t errlen);
void ydoc_free(ydoc *y);
yaml_node_t *ydoc_root(ydoc *y);

/* Fails on a key that is not in `allowed` (NULL-terminated) or appears twice, and on a node that is
 * not a mapping. `where` is the dotted path of the mapping for messages ("" for the root). */
rnnt_status ydoc_check_keys(ydoc *y, yaml_node_t *map, const char *where, const char *const *allowed);
/* The value node of `key` in mapping `map`, or NULL. */
yaml_node_t *ydoc_get(ydoc *y, yaml_node_t *map, const char *key);
/* Error at a node: "FILE:LINE:COL: WHERE.KEY: message". Always returns `s`. */
rnnt_status ydoc_error(ydoc *y, const yaml_node_t *at, rnnt_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Typed reads. `required` = 1: a missing key is an error; otherwise *out keeps its default. */
rnnt_status ydoc_int(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required,
                     long long lo, long long hi, long long *out);
rnnt_status ydoc_double(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required,
                        double lo, double hi, double *out);
rnnt_status ydoc_bool(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required,
                      int *out);
/* A string scalar; with `choices` (NULL-terminated) it must be one of them. */
rnnt_status ydoc_str(ydoc *y, yaml_node_t *map, const char *where, const char *key, int required,
                     const char *const *choices, char *out, size_t outlen);

/* Scalar conversions used by the typed reads (exposed for the daemon config). */
int ydoc_parse_int(const char *s, long long *out);
int ydoc_parse_double(const char *s, double *out);
int ydoc_parse_bool(const char *s, int *out);

#ifdef __cplusplus
}
#endif
#endif
