/* body.c — JSON and .npy request bodies. */
#include "body.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

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

int body_parse_json(const char *buf, size_t len, int dim, int max_frames, body_feats *out, req_opts *o,
                    srv_err *e)
{
    out->data = NULL;
    out->frames = 0;
    size_t max_commas = (size_t)max_frames * (size_t)dim + 64;
    if (prescan(buf, len, max_commas, e)) return -1;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        srv_err_set(e, 400, "invalid_json", "invalid JSON at line %d, column %d: %s", je.line,
                    je.column, je.text);
        return -1;
    }
    int rc = -1;
    float *data = NULL;
    if (!json_is_object(root)) {
        srv_err_set(e, 400, "invalid_request", "the body must be a JSON object with \"features\"");
        goto done;
    }
    const char *key;
    json_t *val;
    json_t *feats = NULL;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "features") == 0) {
            feats = val;
        } else if (strcmp(key, "timestamps") == 0) {
            if (!json_is_boolean(val)) {
                srv_err_set(e, 400, "invalid_request", "\"timestamps\" must be true or false");
                goto done;
            }
            o->timestamps = json_is_true(val);
        } else {
            srv_err_set(e, 400, "invalid_request", "unknown key \"%.64s\" (allowed: features, timestamps)",
                        key);
            goto done;
        }
    }
    if (!feats) {
        srv_err_set(e, 400, "invalid_request", "missing \"features\": [[%d floats], ...]", dim);
        goto done;
    }
    if (!json_is_array(feats)) {
        srv_err_set(e, 400, "invalid_request", "\"features\" must be an array of frames");
        goto done;
    }
    size_t T = json_array_size(feats);
    if (T > (size_t)max_frames) {
        srv_err_set(e, 413, "too_many_frames", "%zu frames, more than limits.max_frames = %d", T,
                    max_frames);
        goto done;
    }
    if (T > 0) {
        data = malloc(T * (size_t)dim * sizeof *data);
        if (!data) {
            srv_err_set(e, 503, "out_of_memory", "no memory for %zu frames", T);
            goto done;
        }
    }
    for (size_t t = 0; t < T; t++) {
        json_t *row = json_array_get(feats, t);
        if (!json_is_array(row)) {
            srv_err_set(e, 400, "invalid_request", "features[%zu] is not an array of numbers", t);
            goto done;
        }
        if (json_array_size(row) != (size_t)dim) {
            srv_err_set(e, 422, "wrong_feature_dim",
                        "features[%zu] has %zu values, the model expects %d per frame", t,
                        json_array_size(row), dim);
            goto done;
        }
        for (size_t f = 0; f < (size_t)dim; f++) {
            json_t *x = json_array_get(row, f);
            if (!json_is_number(x)) {
                srv_err_set(e, 400, "invalid_request", "features[%zu][%zu] is not a number", t, f);
                goto done;
            }
            double v = json_number_value(x);
            float fv = (float)v;
            /* The spec's bound, exactly: a double a little above FLT_MAX would round down to it. */
            if (!(v >= -FLT_MAX && v <= FLT_MAX)) {
                srv_err_set(e, 422, "non_finite_feature",
                            "features[%zu][%zu] = %g is not a finite float32", t, f, v);
                goto done;
            }
            data[t * (size_t)dim + f] = fv;
        }
    }
    out->data = data;
    out->frames = (int)T;
    data = NULL;
    rc = 0;
done:
    free(data);
    json_decref(root);
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
