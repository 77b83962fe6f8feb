/* fuzz_json — a request's options and JSON body (server/body.c) as the daemon applies them: query
 * parameters first, then the body. Input: an optional first line "?key=value&key" (the query string,
 * already split and decoded as libmicrohttpd hands it over), then the JSON body. The model width is 3
 * and the frame limit 16, so small inputs reach every check. Properties: an accepted body has at
 * most 16 frames of 3 finite values; a rejection is a 4xx (or 503) with a code and a message; a
 * parse leaves no memory behind (LeakSanitizer). */
#include <math.h>

#include "body.h"
#include "fuzz_util.h"

enum { DIM = 3, MAX_FRAMES = 16 };

static void check_err(const srv_err *e)
{
    FUZZ_CHECK((e->status >= 400 && e->status < 500) || e->status == 503, "status %u", e->status);
    FUZZ_CHECK(e->code && e->code[0], "no error code");
    fuzz_check_message(e->message, sizeof e->message);
}

/* Each '&'-separated "key[=value]" of the query line; a key without '=' has a NULL value as in MHD. */
static int apply_query(char *q, req_opts *o, srv_err *e)
{
    for (char *save = NULL, *kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        if (eq) *eq = '\0';
        if (body_query_param(kv, eq ? eq + 1 : NULL, o, e)) return -1;
        FUZZ_CHECK(o->timestamps == 0 || o->timestamps == 1, "timestamps %d", o->timestamps);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    req_opts o;
    req_opts_default(&o);
    srv_err e = {0};
    const char *body = (const char *)data;
    size_t len = size;
    if (size && data[0] == '?') {
        const uint8_t *nl = memchr(data, '\n', size);
        size_t qlen = nl ? (size_t)(nl - data) : size;
        char *q = fuzz_strndup(data + 1, qlen - 1);
        int rc = apply_query(q, &o, &e);
        free(q);
        if (rc) {
            check_err(&e);
            return 0;
        }
        body += nl ? qlen + 1 : qlen;
        len -= nl ? qlen + 1 : qlen;
    }
    body_feats f;
    if (body_parse_json(body, len, DIM, MAX_FRAMES, &f, &o, &e) == 0) {
        FUZZ_CHECK(f.frames >= 0 && f.frames <= MAX_FRAMES, "%d frames", f.frames);
        FUZZ_CHECK((f.frames == 0) == (f.data == NULL), "frames %d, data %p", f.frames, (void *)f.data);
        for (int i = 0; i < f.frames * DIM; i++) FUZZ_CHECK(isfinite(f.data[i]), "value %d", i);
        FUZZ_CHECK(o.timestamps == 0 || o.timestamps == 1, "timestamps %d", o.timestamps);
        free(f.data);
    } else {
        FUZZ_CHECK(f.data == NULL, "data left after an error");
        check_err(&e);
    }
    return 0;
}
