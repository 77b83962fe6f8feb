/* reply.c — JSON responses and the error shape. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_err_set(srv_err *e, unsigned status, const char *code, const char *fmt, ...)
{
    e->status = status;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

static void add_headers(struct MHD_Response *r, const reply_opts *o)
{
    if (!o) return;
    if (o->request_id && o->request_id[0]) MHD_add_response_header(r, "X-Request-Id", o->request_id);
    if (o->retry_after_s > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", o->retry_after_s);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    if (o->allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, o->allow);
    if (o->www_authenticate) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (o->close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
}

enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *content_type,
                           char *text, size_t len, const reply_opts *o)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    add_headers(r, o);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, json_t *body, const reply_opts *o)
{
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(7)) : NULL;
    json_decref(body);
    if (!text) {
        /* Out of memory while formatting: still answer with the error shape, from static text. */
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        struct MHD_Response *r = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom,
                                                                 MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_INTERNAL_SERVER_ERROR, r);
        MHD_destroy_response(r);
        return ret;
    }
    size_t len = strlen(text);
    /* A trailing newline makes curl output readable; JSON parsers ignore it. */
    char *t2 = realloc(text, len + 2);
    if (t2) {
        text = t2;
        text[len++] = '\n';
        text[len] = '\0';
    }
    return reply_text(c, status, "application/json", text, len, o);
}

char *reply_error_body(const srv_err *e)
{
    json_t *doc = json_pack("{s:{s:s,s:s}}", "error", "code", e->code ? e->code : "internal",
                            "message", e->message);
    if (!doc) return NULL;
    char *t = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return t;
}

enum MHD_Result reply_error(struct MHD_Connection *c, const srv_err *e, const reply_opts *o)
{
    unsigned status = e->status >= 400 && e->status <= 599 ? e->status : 500;
    /* json_pack with "s" rejects invalid UTF-8; messages may quote client bytes, so fall back to a
     * sanitised copy rather than losing the error. */
    json_t *doc = json_pack("{s:{s:s,s:s}}", "error", "code", e->code ? e->code : "internal",
                            "message", e->message);
    if (!doc) {
        char clean[sizeof e->message];
        size_t i = 0;
        for (; e->message[i] && i + 1 < sizeof clean; i++)
            clean[i] = (unsigned char)e->message[i] < 0x80 ? e->message[i] : '?';
        clean[i] = '\0';
        doc = json_pack("{s:{s:s,s:s}}", "error", "code", e->code ? e->code : "internal", "message",
                        clean);
    }
    return reply_json(c, status, doc, o);
}
