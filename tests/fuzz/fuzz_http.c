/* fuzz_http — the daemon's HTTP request-head scanner and parser and its chunked-body decoder
 * (server/http_parse.c), on arbitrary bytes, driven as server/transport.c drives them: the head is
 * scanned as it arrives, parsed in place once complete, and what follows is decoded as a chunked body.
 * The first input byte chooses the read size (1-16 bytes) of the piecewise runs.
 * Properties: scanning piecewise gives the same verdict (head length, or error status) as scanning
 * at once; a parsed head's strings lie inside the head and obey the grammar (token method, origin-form
 * path, HTTP/1.0 or 1.1, at most HP_MAX_HEADERS fields, never both Content-Length and chunked); every
 * rejection has a status we document, a code and a message; decoding a body piecewise gives the same
 * verdict, the same bytes consumed and the same data as decoding it at once, and never more data than
 * input. */
#include "fuzz_util.h"
#include "http_parse.h"

static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static void check_error(const hp_error *e)
{
    static const unsigned ok[] = {400, 408, 414, 417, 431, 501, 505};
    int found = 0;
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) found |= e->status == ok[i];
    FUZZ_CHECK(found, "status %u", e->status);
    FUZZ_CHECK(e->code && e->code[0], "no code");
    FUZZ_CHECK(e->message && e->message[0], "no message");
}

static int inside(const char *p, const char *base, size_t n)
{
    return p >= base && p < base + n && memchr(p, '\0', (size_t)(base + n - p)) != NULL;
}

typedef struct {
    uint8_t *out;
    size_t n, cap;
} sink;

static int collect(void *user, const char *data, size_t len)
{
    sink *s = user;
    FUZZ_CHECK(s->n + len <= s->cap, "more data (%zu) than input (%zu)", s->n + len, s->cap);
    memcpy(s->out + s->n, data, len);
    s->n += len;
    return 0;
}

/* Decodes in[0..n) in pieces of `step` bytes (each piece handed over in a buffer of its own size, so
 * that ASan sees any read past it). */
static hp_status decode(const uint8_t *in, size_t n, size_t step, sink *s, size_t *consumed, unsigned *status)
{
    hp_chunked c;
    hp_chunked_init(&c);
    size_t off = 0;
    hp_status st = HP_INCOMPLETE;
    *status = 0;
    while (off < n) {
        size_t k = n - off < step ? n - off : step, used = 0;
        uint8_t *piece = malloc(k);
        if (!piece) abort();
        memcpy(piece, in + off, k);
        hp_error e = {0};
        st = hp_chunked_feed(&c, (const char *)piece, k, &used, collect, s, &e);
        free(piece);
        FUZZ_CHECK(used <= k, "used %zu of %zu", used, k);
        off += used;
        if (st == HP_ERROR) {
            check_error(&e);
            FUZZ_CHECK(e.status == 400, "chunked error status %u", e.status);
            *status = e.status;
            break;
        }
        if (st == HP_COMPLETE) break;
        FUZZ_CHECK(used == k, "incomplete but %zu of %zu bytes left", k - used, k);
    }
    FUZZ_CHECK(c.total == s->n, "total %llu, data %zu", c.total, s->n);
    *consumed = off;
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t step = (size_t)(data[0] % 16) + 1;
    data++;
    size--;
    const char *buf = (const char *)data;

    /* ---- the head: at once and piecewise ---- */
    hp_scan a, b;
    hp_scan_init(&a);
    hp_scan_init(&b);
    size_t hl_a = 0, hl_b = 0;
    hp_error ea = {0}, eb = {0};
    hp_status sa = hp_scan_head(&a, buf, size, &hl_a, &ea), sb;
    size_t len = 0;
    do {
        len = len + step < size ? len + step : size;
        sb = hp_scan_head(&b, buf, len, &hl_b, &eb);
    } while (sb == HP_INCOMPLETE && len < size);
    FUZZ_CHECK(sa == sb, "at once %d, piecewise %d", sa, sb);
    if (sa == HP_ERROR) {
        check_error(&ea);
        FUZZ_CHECK(ea.status == eb.status, "at once %u, piecewise %u", ea.status, eb.status);
    }
    size_t body_at = 0;
    if (sa == HP_COMPLETE) {
        FUZZ_CHECK(hl_a == hl_b && hl_a >= 4 && hl_a <= size, "head %zu / %zu of %zu", hl_a, hl_b, size);
        FUZZ_CHECK(!memcmp(buf + hl_a - 4, "\r\n\r\n", 4), "head does not end in an empty line");
        char *head = malloc(hl_a);
        if (!head) abort();
        memcpy(head, buf, hl_a);
        hp_request *req = malloc(sizeof *req);
        if (!req) abort();
        hp_error e = {0};
        if (hp_parse_head(head, hl_a, req, &e) == 0) {
            FUZZ_CHECK(inside(req->method, head, hl_a) && req->method[0], "method");
            for (const char *p = req->method; *p; p++) FUZZ_CHECK(is_tchar((unsigned char)*p), "method char");
            FUZZ_CHECK(inside(req->path, head, hl_a) && req->path[0] == '/', "path");
            FUZZ_CHECK(!strchr(req->path, '?'), "query left in the path");
            FUZZ_CHECK(req->query[0] == '\0' || inside(req->query, head, hl_a), "query");
            FUZZ_CHECK(req->minor == 0 || req->minor == 1, "minor %d", req->minor);
            FUZZ_CHECK(req->n_headers >= 0 && req->n_headers <= HP_MAX_HEADERS, "%d headers", req->n_headers);
            for (int i = 0; i < req->n_headers; i++) {
                const hp_header *h = &req->headers[i];
                FUZZ_CHECK(inside(h->name, head, hl_a) && h->name[0], "header name %d", i);
                FUZZ_CHECK(inside(h->value, head, hl_a), "header value %d", i);
                for (const char *p = h->name; *p; p++) FUZZ_CHECK(is_tchar((unsigned char)*p), "name char");
                for (const char *p = h->value; *p; p++)
                    FUZZ_CHECK(*p == '\t' || (unsigned char)*p >= 0x20, "control character in a value");
                size_t vl = strlen(h->value);
                FUZZ_CHECK(vl == 0 || (h->value[0] != ' ' && h->value[vl - 1] != ' '), "value not trimmed");
            }
            FUZZ_CHECK(!(req->chunked && req->has_length), "both framings");
            FUZZ_CHECK(!req->chunked || req->minor == 1, "chunked on HTTP/1.0");
            FUZZ_CHECK(req->minor == 0 || hp_header_get(req, "Host"), "HTTP/1.1 without Host");
        } else {
            check_error(&e);
        }
        free(req);
        free(head);
        body_at = hl_a;
    }

    /* ---- what follows as a chunked body: at once and piecewise ---- */
    const uint8_t *in = data + body_at;
    size_t n = size - body_at;
    sink s1 = {malloc(n + 1), 0, n}, s2 = {malloc(n + 1), 0, n};
    if (!s1.out || !s2.out) abort();
    size_t c1 = 0, c2 = 0;
    unsigned st1 = 0, st2 = 0;
    hp_status r1 = decode(in, n, n ? n : 1, &s1, &c1, &st1);
    hp_status r2 = decode(in, n, step, &s2, &c2, &st2);
    FUZZ_CHECK(r1 == r2, "at once %d, piecewise %d", r1, r2);
    FUZZ_CHECK(st1 == st2, "status %u / %u", st1, st2);
    FUZZ_CHECK(c1 == c2, "consumed %zu / %zu", c1, c2);
    FUZZ_CHECK(s1.n == s2.n && !memcmp(s1.out, s2.out, s1.n), "decoded data differs (%zu / %zu bytes)", s1.n, s2.n);
    FUZZ_CHECK(s1.n <= n, "more data than input");
    free(s1.out);
    free(s2.out);
    return 0;
}
