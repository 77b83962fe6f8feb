/* http_parse.c — strict RFC 9112 request heads and chunked bodies (see http_parse.h). */
#include "http_parse.h"

#include <string.h>
#include <strings.h>

#define MAX_LEADING_EMPTY 8 /* empty lines tolerated before a request line */
#define MAX_CHUNK_SIZE (1ULL << 60)

static int fail(hp_error *e, unsigned status, const char *code, const char *message)
{
    if (e) {
        e->status = status;
        e->code = code;
        e->message = message;
    }
    return -1;
}

/* tchar (RFC 9110 §5.6.2) */
static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-vchar, SP or HTAB (obs-text allowed; CTLs and DEL are not). */
static int is_value_char(unsigned char c)
{
    return c == '\t' || c == ' ' || (c >= 0x21 && c != 0x7f);
}

void hp_scan_init(hp_scan *s)
{
    memset(s, 0, sizeof *s);
}

hp_status hp_scan_head(hp_scan *s, const char *buf, size_t len, size_t *head_len, hp_error *err)
{
    /* Limits are checked byte by byte, so the verdict never depends on how the bytes were split
     * into reads (the fuzz target checks that). */
    size_t i = s->pos;
    for (; i < len; i++) {
        if (s->started && i + 1 - s->start > HP_MAX_HEAD)
            return fail(err, 431, "headers_too_large", "the request head is larger than 32768 bytes"), HP_ERROR;
        char ch = buf[i];
        if (ch == '\r') {
            if (i + 1 == len) break; /* decide when the next byte comes */
            if (buf[i + 1] != '\n')
                return fail(err, 400, "invalid_request", "a CR not followed by LF in the request head"), HP_ERROR;
            continue;
        }
        if (ch != '\n') {
            s->started = 1;
            if (!s->line_done && i + 1 - s->start > HP_MAX_REQUEST_LINE)
                return fail(err, 414, "uri_too_long", "the request line is longer than 8192 bytes"), HP_ERROR;
            continue;
        }
        if (i == 0 || buf[i - 1] != '\r')
            return fail(err, 400, "invalid_request", "bare LF line ending in the request head (CRLF required)"),
                   HP_ERROR;
        size_t line_len = i - 1 - s->line_start;
        if (!s->started) {
            /* An empty line before the request line. */
            if (i + 1 > MAX_LEADING_EMPTY * 2)
                return fail(err, 400, "invalid_request", "too many empty lines before the request line"), HP_ERROR;
            s->start = s->line_start = i + 1;
            continue;
        }
        if (!s->line_done) {
            s->line_done = 1;
        } else if (line_len == 0) {
            *head_len = i + 1;
            s->pos = i + 1;
            return HP_COMPLETE;
        }
        s->line_start = i + 1;
    }
    s->pos = i;
    return HP_INCOMPLETE;
}

static hp_method method_id(const char *m)
{
    static const char *const names[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (strcmp(m, names[i]) == 0) return (hp_method)i;
    return HP_OTHER;
}

const char *hp_header_get(const hp_request *req, const char *name)
{
    for (int i = 0; i < req->n_headers; i++)
        if (strcasecmp(req->headers[i].name, name) == 0) return req->headers[i].value;
    return NULL;
}

static int count_headers(const hp_request *req, const char *name)
{
    int n = 0;
    for (int i = 0; i < req->n_headers; i++) n += strcasecmp(req->headers[i].name, name) == 0;
    return n;
}

/* Next element of a comma list: *p advanced past it; element [*b, *e) trimmed; 0 at the end. */
static int list_next(const char **p, const char **b, const char **e)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == ',') s++;
    if (!*s) return 0;
    const char *t = s;
    while (*t && *t != ',') t++;
    const char *end = t;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t')) end--;
    *b = s;
    *e = end;
    *p = t;
    return 1;
}

int hp_list_has(const char *list, const char *token)
{
    if (!list) return 0;
    size_t n = strlen(token);
    const char *b, *e;
    while (list_next(&list, &b, &e))
        if ((size_t)(e - b) == n && strncasecmp(b, token, n) == 0) return 1;
    return 0;
}

/* Framing and connection semantics from the parsed headers. */
static int interpret(hp_request *req, hp_error *err)
{
    int hosts = count_headers(req, "Host");
    if (hosts > 1) return fail(err, 400, "invalid_request", "more than one Host header");
    if (req->minor == 1 && hosts == 0) return fail(err, 400, "invalid_request", "HTTP/1.1 request without Host");

    int n_cl = count_headers(req, "Content-Length"), n_te = count_headers(req, "Transfer-Encoding");
    if (n_te && n_cl)
        return fail(err, 400, "invalid_request", "both Content-Length and Transfer-Encoding (RFC 9112 §6.1)");
    if (n_cl > 1) return fail(err, 400, "invalid_request", "more than one Content-Length header");
    if (n_cl == 1) {
        const char *v = hp_header_get(req, "Content-Length");
        unsigned long long x = 0;
        if (!*v) return fail(err, 400, "invalid_request", "malformed Content-Length");
        for (; *v; v++) {
            if (*v < '0' || *v > '9') return fail(err, 400, "invalid_request", "malformed Content-Length");
            if (x > (MAX_CHUNK_SIZE - 9) / 10) return fail(err, 400, "invalid_request", "Content-Length too large");
            x = x * 10 + (unsigned)(*v - '0');
        }
        req->has_length = 1;
        req->content_length = x;
    }
    if (n_te) {
        if (req->minor == 0)
            return fail(err, 400, "invalid_request", "Transfer-Encoding in an HTTP/1.0 request");
        /* The codings of every Transfer-Encoding line, in order: only a single "chunked" is ours. */
        int n_codings = 0, last_chunked = 0, chunked_seen = 0;
        for (int i = 0; i < req->n_headers; i++) {
            if (strcasecmp(req->headers[i].name, "Transfer-Encoding")) continue;
            const char *p = req->headers[i].value, *b, *e;
            while (list_next(&p, &b, &e)) {
                n_codings++;
                last_chunked = (size_t)(e - b) == 7 && strncasecmp(b, "chunked", 7) == 0;
                chunked_seen += last_chunked;
            }
        }
        if (n_codings == 0) return fail(err, 400, "invalid_request", "empty Transfer-Encoding");
        if (!last_chunked)
            return fail(err, 400, "invalid_request",
                        "Transfer-Encoding whose final coding is not chunked: the body length is unknown");
        if (chunked_seen > 1) return fail(err, 400, "invalid_request", "chunked applied more than once");
        if (n_codings > 1)
            return fail(err, 501, "unsupported_transfer_coding",
                        "transfer codings other than chunked are not implemented");
        req->chunked = 1;
    }
    req->keep_alive = req->minor == 1;
    for (int i = 0; i < req->n_headers; i++) {
        if (strcasecmp(req->headers[i].name, "Connection")) continue;
        if (hp_list_has(req->headers[i].value, "close")) req->keep_alive = 0;
        else if (req->minor == 0 && hp_list_has(req->headers[i].value, "keep-alive")) req->keep_alive = 1;
    }
    int n_expect = count_headers(req, "Expect");
    if (n_expect) {
        const char *v = hp_header_get(req, "Expect");
        if (n_expect > 1 || strcasecmp(v, "100-continue") != 0)
            return fail(err, 417, "expectation_failed", "the only expectation understood is 100-continue");
        req->expect_continue = req->minor == 1;
    }
    return 0;
}

int hp_parse_head(char *head, size_t head_len, hp_request *req, hp_error *err)
{
    memset(req, 0, sizeof *req);
    char *p = head, *end = head + head_len;
    while (end - p >= 2 && p[0] == '\r' && p[1] == '\n') p += 2;

    /* request-line = method SP request-target SP HTTP-version CRLF */
    char *m = p;
    while (p < end && is_tchar((unsigned char)*p)) p++;
    if (p == m || p >= end || *p != ' ') return fail(err, 400, "invalid_request", "malformed request line (method)");
    *p++ = '\0';
    char *target = p;
    while (p < end && (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f) p++;
    if (p == target || p >= end || *p != ' ')
        return fail(err, 400, "invalid_request", "malformed request line (target)");
    *p++ = '\0';
    char *ver = p;
    if (end - ver < 10 || memcmp(ver, "HTTP/", 5) != 0 || ver[5] < '0' || ver[5] > '9' || ver[6] != '.' ||
        ver[7] < '0' || ver[7] > '9' || ver[8] != '\r' || ver[9] != '\n')
        return fail(err, 400, "invalid_request", "malformed request line (version)");
    if (ver[5] != '1' || (ver[7] != '0' && ver[7] != '1'))
        return fail(err, 505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are supported");
    req->minor = ver[7] - '0';
    ver[8] = '\0';
    p = ver + 10;
    req->method = m;
    req->method_id = method_id(m);
    req->target = target;

    /* Targets: origin-form (/path?query), or absolute-form (http://authority/path?query). */
    char *path = target;
    if (strncasecmp(path, "http://", 7) == 0 || strncasecmp(path, "https://", 8) == 0) {
        char *auth = strstr(path, "//") + 2;
        char *slash = strchr(auth, '/');
        if (!slash) return fail(err, 400, "invalid_request", "absolute-form target without a path");
        path = slash;
    }
    if (path[0] != '/') return fail(err, 400, "invalid_request", "the request target must start with /");
    req->path = path;
    req->query = "";
    char *q = strchr(path, '?');
    if (q) {
        *q = '\0'; /* target and path end before the query from here on */
        req->query = q + 1;
    }

    /* field-line = field-name ":" OWS field-value OWS CRLF; the head ends with an empty line. */
    for (;;) {
        if (end - p < 2) return fail(err, 400, "invalid_request", "truncated request head");
        if (p[0] == '\r' && p[1] == '\n') break;
        if (*p == ' ' || *p == '\t')
            return fail(err, 400, "invalid_request", "obsolete line folding in a header (RFC 9112 §5.2)");
        char *name = p;
        while (p < end && is_tchar((unsigned char)*p)) p++;
        if (p == name || p >= end || *p != ':')
            return fail(err, 400, "invalid_request", "malformed header line (name)");
        *p++ = '\0';
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        char *value = p;
        while (p < end && is_value_char((unsigned char)*p)) p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return fail(err, 400, "invalid_request", "malformed header line (control character in the value)");
        char *vend = p;
        while (vend > value && (vend[-1] == ' ' || vend[-1] == '\t')) vend--;
        *vend = '\0';
        p += 2;
        if (req->n_headers == HP_MAX_HEADERS)
            return fail(err, 431, "headers_too_large", "more than 100 header lines");
        req->headers[req->n_headers].name = name;
        req->headers[req->n_headers].value = value;
        req->n_headers++;
    }
    if (p + 2 != end) return fail(err, 400, "invalid_request", "bytes after the end of the head");
    return interpret(req, err);
}

/* ---- chunked ---- */

enum {
    CK_SIZE = 0, /* chunk-size hex digits */
    CK_SIZE_WS,  /* BWS after the digits, before ';' */
    CK_EXT,      /* chunk extensions, to the CR */
    CK_SIZE_LF,
    CK_DATA,
    CK_DATA_CR,
    CK_DATA_LF,
    CK_TRAILER_START, /* the start of a trailer line or the final CRLF */
    CK_TRAILER,
    CK_TRAILER_LF,
    CK_END_LF,
    CK_DONE,
};

void hp_chunked_init(hp_chunked *c)
{
    memset(c, 0, sizeof *c);
}

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

#define CK_FAIL(msg) \
    do { \
        *used = i; \
        fail(err, 400, "invalid_chunked_body", msg); \
        return HP_ERROR; \
    } while (0)

hp_status hp_chunked_feed(hp_chunked *c, const char *in, size_t len, size_t *used, hp_data_fn on_data,
                          void *user, hp_error *err)
{
    size_t i = 0;
    while (i < len) {
        unsigned char ch = (unsigned char)in[i];
        switch (c->state) {
        case CK_DATA: {
            size_t n = len - i;
            if ((unsigned long long)n > c->left) n = (size_t)c->left;
            c->left -= n;
            c->total += n;
            size_t at = i;
            i += n;
            if (c->left == 0) c->state = CK_DATA_CR;
            if (on_data && on_data(user, in + at, n)) {
                *used = i;
                return HP_INCOMPLETE;
            }
            continue;
        }
        case CK_SIZE: {
            int h = hexval(ch);
            if (h >= 0) {
                if (c->left > (MAX_CHUNK_SIZE >> 4)) CK_FAIL("chunk size too large");
                c->left = c->left * 16 + (unsigned)h;
                c->saw_digit = 1;
            } else if (!c->saw_digit) {
                CK_FAIL("chunk size missing");
            } else if (ch == '\r') {
                c->state = CK_SIZE_LF;
            } else if (ch == ';') {
                c->state = CK_EXT;
            } else if (ch == ' ' || ch == '\t') {
                c->state = CK_SIZE_WS;
            } else {
                CK_FAIL("malformed chunk size");
            }
            break;
        }
        case CK_SIZE_WS:
            if (ch == ';') c->state = CK_EXT;
            else if (ch != ' ' && ch != '\t') CK_FAIL("malformed chunk size line");
            break;
        case CK_EXT:
            if (ch == '\r') c->state = CK_SIZE_LF;
            else if (!is_value_char(ch)) CK_FAIL("control character in a chunk extension");
            break;
        case CK_SIZE_LF:
            if (ch != '\n') CK_FAIL("chunk size line not ended by CRLF");
            c->line = 0;
            c->saw_digit = 0;
            c->state = c->left ? CK_DATA : CK_TRAILER_START;
            i++;
            continue;
        case CK_DATA_CR:
            if (ch != '\r') CK_FAIL("chunk data longer than its size, or not followed by CRLF");
            c->state = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (ch != '\n') CK_FAIL("chunk data not followed by CRLF");
            c->state = CK_SIZE;
            c->line = 0;
            i++;
            continue;
        case CK_TRAILER_START:
            if (ch == '\r') c->state = CK_END_LF;
            else if (ch == ' ' || ch == '\t') CK_FAIL("obsolete line folding in a trailer");
            else if (!is_tchar(ch)) CK_FAIL("malformed trailer line");
            else c->state = CK_TRAILER;
            break;
        case CK_TRAILER:
            if (ch == '\r') c->state = CK_TRAILER_LF;
            else if (!is_value_char(ch)) CK_FAIL("control character in a trailer");
            break;
        case CK_TRAILER_LF:
            if (ch != '\n') CK_FAIL("trailer line not ended by CRLF");
            c->state = CK_TRAILER_START;
            c->line = 0;
            c->trailer++;
            i++;
            continue;
        case CK_END_LF:
            if (ch != '\n') CK_FAIL("chunked body not ended by CRLF");
            c->state = CK_DONE;
            *used = i + 1;
            return HP_COMPLETE;
        default:
            *used = i;
            return HP_COMPLETE;
        }
        /* Every byte that is not data counts against the line and trailer limits. */
        if (++c->line > HP_MAX_CHUNK_LINE) CK_FAIL("chunk size or trailer line too long");
        if (c->state >= CK_TRAILER_START && ++c->trailer > HP_MAX_TRAILER) CK_FAIL("trailer section too large");
        i++;
    }
    *used = i;
    if (c->state == CK_DONE) return HP_COMPLETE;
    return HP_INCOMPLETE;
}

const char *hp_reason(unsigned status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}
