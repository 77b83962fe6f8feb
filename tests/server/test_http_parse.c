/* test_http_parse — the strict request-head parser and chunked decoder (server/http_parse.c):
 * every rule of RFC 9112 we enforce, the status each violation gets, byte-at-a-time feeding equal
 * to one-shot parsing, and limits found as soon as they are crossed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_parse.h"

/* Scans and parses text as one request head. Returns the status the server would answer with
 * (0: accepted) and fills *req (its strings point into *keep, which the caller frees). */
static unsigned parse(const char *text, hp_request *req, char **keep)
{
    size_t len = strlen(text), hl = 0;
    hp_scan sc;
    hp_scan_init(&sc);
    hp_error e = {0};
    *keep = NULL;
    hp_status st = hp_scan_head(&sc, text, len, &hl, &e);
    if (st == HP_ERROR) return e.status;
    if (st == HP_INCOMPLETE) return 1;
    char *head = malloc(hl);
    memcpy(head, text, hl);
    *keep = head;
    if (hp_parse_head(head, hl, req, &e)) {
        assert_non_null(e.code);
        assert_non_null(e.message);
        return e.status;
    }
    return 0;
}

static unsigned status_of(const char *text)
{
    hp_request *req = malloc(sizeof *req);
    char *keep;
    unsigned st = parse(text, req, &keep);
    free(keep);
    free(req);
    return st;
}

static void test_valid_request(void **state)
{
    (void)state;
    hp_request req;
    char *keep;
    assert_int_equal(parse("\r\nPOST /v1/transcribe?timestamps=false&x=1 HTTP/1.1\r\nHost: a\r\n"
                           "Content-Type:  application/json \t\r\nContent-Length: 12\r\nX-Empty:\r\n\r\n",
                           &req, &keep),
                     0);
    assert_string_equal(req.method, "POST");
    assert_int_equal(req.method_id, HP_POST);
    assert_string_equal(req.path, "/v1/transcribe");
    assert_string_equal(req.query, "timestamps=false&x=1");
    assert_int_equal(req.minor, 1);
    assert_int_equal(req.n_headers, 4);
    assert_string_equal(hp_header_get(&req, "content-type"), "application/json");
    assert_string_equal(hp_header_get(&req, "X-EMPTY"), "");
    assert_null(hp_header_get(&req, "Accept"));
    assert_true(req.has_length);
    assert_int_equal(req.content_length, 12);
    assert_false(req.chunked);
    assert_true(req.keep_alive);
    assert_false(req.expect_continue);
    free(keep);

    assert_int_equal(parse("GET http://example.org/health HTTP/1.0\r\n\r\n", &req, &keep), 0);
    assert_string_equal(req.path, "/health");
    assert_string_equal(req.query, "");
    assert_false(req.keep_alive); /* HTTP/1.0 closes unless asked */
    free(keep);
    assert_int_equal(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &req, &keep), 0);
    assert_true(req.keep_alive);
    free(keep);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n", &req, &keep), 0);
    assert_false(req.keep_alive);
    free(keep);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue\r\n\r\n",
                           &req, &keep),
                     0);
    assert_true(req.chunked);
    assert_false(req.has_length);
    assert_true(req.expect_continue);
    free(keep);
}

static void test_line_endings(void **state)
{
    (void)state;
    /* A bare LF anywhere, or a CR without LF, is refused as soon as it arrives. */
    assert_int_equal(status_of("GET / HTTP/1.1\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\n\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\n\n"), 400);
    assert_int_equal(status_of("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\n"), 1); /* incomplete, nothing wrong */
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r"), 1);
}

static void test_header_syntax(void **state)
{
    (void)state;
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n  folded\r\n\r\n"), 400); /* obs-fold */
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tfolded\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), 400); /* space before colon */
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\nX(: v\r\n\r\n"), 400);
    char nul[] = "GET / HTTP/1.1\r\nHost: a\r\nX: a?b\r\n\r\n";
    nul[strlen("GET / HTTP/1.1\r\nHost: a\r\nX: a")] = '\x01';
    assert_int_equal(status_of(nul), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n"), 0); /* obs-text */
    /* Host: required once on 1.1, at most once on 1.0. */
    assert_int_equal(status_of("GET / HTTP/1.1\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.0\r\n\r\n"), 0);
}

static void test_request_line(void **state)
{
    (void)state;
    assert_int_equal(status_of("GET /  HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET /\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("G@T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET nothing HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / http/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1x\r\nHost: a\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
    assert_int_equal(status_of("GET / HTTP/1.2\r\nHost: a\r\n\r\n"), 505);
    assert_int_equal(status_of("GET / HTTP/0.9\r\nHost: a\r\n\r\n"), 505);
    assert_int_equal(status_of("BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n"), 0); /* a method we do not know: routes' 405 */
    assert_int_equal(status_of("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
}

static void test_framing(void **state)
{
    (void)state;
    const char *p = "POST / HTTP/1.1\r\nHost: a\r\n";
    char buf[512];
#define FRAMING(hdrs) (snprintf(buf, sizeof buf, "%s%s\r\n", p, hdrs), status_of(buf))
    assert_int_equal(FRAMING("Content-Length: 5\r\n"), 0);
    assert_int_equal(FRAMING("Content-Length: 5\r\nContent-Length: 5\r\n"), 400);
    assert_int_equal(FRAMING("Content-Length: 5\r\nContent-Length: 6\r\n"), 400);
    assert_int_equal(FRAMING("Content-Length: 5, 5\r\n"), 400);
    assert_int_equal(FRAMING("Content-Length: +5\r\n"), 400);
    assert_int_equal(FRAMING("Content-Length: -1\r\n"), 400);
    assert_int_equal(FRAMING("Content-Length: \r\n"), 400);
    assert_int_equal(FRAMING("Content-Length: 0x10\r\n"), 400);
    assert_int_equal(FRAMING("Content-Length: 99999999999999999999999\r\n"), 400);
    /* Smuggling: both framings. */
    assert_int_equal(FRAMING("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), 400);
    assert_int_equal(FRAMING("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), 400);
    /* Transfer codings: only one "chunked". */
    assert_int_equal(FRAMING("Transfer-Encoding: chunked\r\n"), 0);
    assert_int_equal(FRAMING("Transfer-Encoding: xchunked\r\n"), 400);
    assert_int_equal(FRAMING("Transfer-Encoding: chunked, identity\r\n"), 400);
    assert_int_equal(FRAMING("Transfer-Encoding: identity, chunked\r\n"), 501);
    assert_int_equal(FRAMING("Transfer-Encoding: gzip, chunked\r\n"), 501);
    assert_int_equal(FRAMING("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"), 501);
    assert_int_equal(FRAMING("Transfer-Encoding: chunked, chunked\r\n"), 400);
    assert_int_equal(FRAMING("Transfer-Encoding: \r\n"), 400);
    assert_int_equal(FRAMING("Transfer-Encoding: ,\r\n"), 400);
    assert_int_equal(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    assert_int_equal(FRAMING("Expect: 100-continue\r\n"), 0);
    assert_int_equal(FRAMING("Expect: something-else\r\n"), 417);
#undef FRAMING
}

static void test_limits(void **state)
{
    (void)state;
    /* A request line over 8192 bytes is refused before the head is complete. */
    size_t n = HP_MAX_REQUEST_LINE + 100;
    char *big = malloc(n + 64);
    memcpy(big, "GET /", 5);
    memset(big + 5, 'a', n - 5);
    big[n] = '\0';
    assert_int_equal(status_of(big), 414);
    /* ... also when the line (and the head) is complete in one piece. */
    snprintf(big + HP_MAX_REQUEST_LINE + 10, 64, " HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_int_equal(status_of(big), 414);
    /* The same length just under the limit is fine. */
    snprintf(big + HP_MAX_REQUEST_LINE - 16, 64, " HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_int_equal(status_of(big), 0);
    free(big);
    /* 100 headers pass, 101 do not. */
    char *h = malloc(8192);
    for (int count = 100; count <= 101; count++) {
        size_t k = (size_t)snprintf(h, 8192, "GET / HTTP/1.1\r\nHost: a\r\n");
        for (int i = 1; i < count; i++) k += (size_t)snprintf(h + k, 8192 - k, "X-%d: v\r\n", i);
        snprintf(h + k, 8192 - k, "\r\n");
        assert_int_equal(status_of(h), count == 100 ? 0 : 431);
    }
    free(h);
    /* A head over 32 KiB: 431 as soon as the limit is crossed, complete or not. */
    size_t m = HP_MAX_HEAD + 10;
    char *huge = malloc(m + 1);
    size_t k = (size_t)snprintf(huge, m + 1, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
    memset(huge + k, 'b', m - k);
    huge[m] = '\0';
    assert_int_equal(status_of(huge), 431);
    /* ... also when complete in one piece. */
    huge = realloc(huge, m + 16);
    memcpy(huge + m - 8, "\r\n\r\n", 5);
    assert_int_equal(status_of(huge), 431);
    free(huge);
}

/* Feeding a head byte by byte finds the same end (and the same error) as all at once. */
static void test_incremental_scan(void **state)
{
    (void)state;
    const char *cases[] = {
        "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /next",
        "\r\n\r\nPOST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
        "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\r\n\r\n",
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *t = cases[c];
        size_t len = strlen(t), hl_all = 0, hl_inc = 0;
        hp_scan a, b;
        hp_scan_init(&a);
        hp_scan_init(&b);
        hp_error e1, e2;
        hp_status all = hp_scan_head(&a, t, len, &hl_all, &e1), inc = HP_INCOMPLETE;
        for (size_t i = 1; i <= len && inc == HP_INCOMPLETE; i++) inc = hp_scan_head(&b, t, i, &hl_inc, &e2);
        assert_int_equal(all, inc);
        if (all == HP_COMPLETE) assert_int_equal(hl_all, hl_inc);
        if (all == HP_ERROR) assert_int_equal(e1.status, e2.status);
    }
}

/* ---- chunked ---- */

typedef struct {
    char out[4096];
    size_t n;
    int stop_after; /* stop after this many data callbacks (0: never) */
    int calls;
} sink;

static int collect(void *user, const char *data, size_t len)
{
    sink *s = user;
    assert_true(s->n + len <= sizeof s->out);
    memcpy(s->out + s->n, data, len);
    s->n += len;
    s->calls++;
    return s->stop_after && s->calls >= s->stop_after;
}

/* Decodes text in pieces of `step` bytes; returns the final status; *rest = bytes left after the end. */
static hp_status decode(const char *text, size_t len, size_t step, sink *s, size_t *rest, unsigned *err_status)
{
    hp_chunked c;
    hp_chunked_init(&c);
    memset(s, 0, sizeof *s);
    size_t off = 0;
    hp_status st = HP_INCOMPLETE;
    while (off < len) {
        size_t n = len - off < step ? len - off : step, used = 0;
        hp_error e = {0};
        st = hp_chunked_feed(&c, text + off, n, &used, collect, s, &e);
        off += used;
        if (st == HP_ERROR) {
            *err_status = e.status;
            return st;
        }
        if (st == HP_COMPLETE) break;
        assert_int_equal(used, n);
    }
    *rest = len - off;
    return st;
}

static void test_chunked_valid(void **state)
{
    (void)state;
    const char *t = "5\r\nhello\r\nA;name=value;x\r\n, world!!!\r\n1 ; ext\r\n.\r\n0\r\nTrailer: x\r\nT2: y\r\n\r\nNEXT";
    size_t len = strlen(t);
    for (size_t step = 1; step <= len; step++) {
        sink s;
        size_t rest = 0;
        unsigned es = 0;
        assert_int_equal(decode(t, len, step, &s, &rest, &es), HP_COMPLETE);
        assert_int_equal(s.n, 16);
        assert_memory_equal(s.out, "hello, world!!!.", 16);
        assert_int_equal(rest, 4); /* "NEXT" belongs to the next request */
    }
    sink s;
    size_t rest;
    unsigned es;
    assert_int_equal(decode("0\r\n\r\n", 5, 5, &s, &rest, &es), HP_COMPLETE);
    assert_int_equal(s.n, 0);
    assert_int_equal(decode("00000aB\r\n", 9, 9, &s, &rest, &es), HP_INCOMPLETE);
    /* The data callback can stop decoding right after its span. */
    hp_chunked c;
    hp_chunked_init(&c);
    memset(&s, 0, sizeof s);
    s.stop_after = 1;
    size_t used = 0;
    hp_error e;
    const char *two = "3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
    assert_int_equal(hp_chunked_feed(&c, two, strlen(two), &used, collect, &s, &e), HP_INCOMPLETE);
    assert_int_equal(used, 6);
    assert_int_equal(s.n, 3);
}

static void test_chunked_invalid(void **state)
{
    (void)state;
    const char *bad[] = {
        "\r\n",                           /* no size */
        "x\r\n",                          /* not hex */
        "5\nhello\r\n0\r\n\r\n",          /* bare LF after the size */
        "5\r\nhello\n0\r\n\r\n",          /* bare LF after the data */
        "5\r\nhelloX\r\n0\r\n\r\n",       /* data longer than its size */
        "5\r\nhello\r\n0\r\n\n",          /* bare LF at the end */
        "5\r\nhello\r\n0\r\nT: x\n\r\n",  /* bare LF in a trailer */
        "5\r\nhello\r\n0\r\n folded\r\n\r\n",
        "5 x\r\nhello\r\n0\r\n\r\n",      /* junk after the size */
        "5;a\x01\r\nhello\r\n0\r\n\r\n",  /* control character in an extension */
        "-5\r\n",
        "fffffffffffffffffff\r\n",        /* overflow */
        "5\rhello",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        for (size_t step = 1; step <= strlen(bad[i]); step += strlen(bad[i]) - 1) {
            sink s;
            size_t rest;
            unsigned es = 0;
            assert_int_equal(decode(bad[i], strlen(bad[i]), step, &s, &rest, &es), HP_ERROR);
            assert_int_equal(es, 400);
        }
    }
    /* A chunk-size line (extensions) longer than HP_MAX_CHUNK_LINE. */
    size_t n = HP_MAX_CHUNK_LINE + 10;
    char *ext = malloc(n + 1);
    ext[0] = '1';
    ext[1] = ';';
    memset(ext + 2, 'e', n - 2);
    ext[n] = '\0';
    sink s;
    size_t rest;
    unsigned es = 0;
    assert_int_equal(decode(ext, n, n, &s, &rest, &es), HP_ERROR);
    free(ext);
    /* A trailer section over HP_MAX_TRAILER, in short lines. */
    size_t tn = HP_MAX_TRAILER + 200, k = 0;
    char *tr = malloc(tn + 16);
    k += (size_t)snprintf(tr, tn, "0\r\n");
    while (k + 8 < tn) k += (size_t)snprintf(tr + k, tn - k, "T: 12\r\n");
    assert_int_equal(decode(tr, k, k, &s, &rest, &es), HP_ERROR);
    free(tr);
}

static void test_reason(void **state)
{
    (void)state;
    assert_string_equal(hp_reason(200), "OK");
    assert_string_equal(hp_reason(431), "Request Header Fields Too Large");
    assert_string_equal(hp_reason(505), "HTTP Version Not Supported");
    assert_string_equal(hp_reason(299), "Unknown");
    assert_true(hp_list_has("a, Close ,b", "close"));
    assert_false(hp_list_has("closed", "close"));
    assert_false(hp_list_has(NULL, "close"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_request),  cmocka_unit_test(test_line_endings),
        cmocka_unit_test(test_header_syntax),  cmocka_unit_test(test_request_line),
        cmocka_unit_test(test_framing),        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_incremental_scan), cmocka_unit_test(test_chunked_valid),
        cmocka_unit_test(test_chunked_invalid), cmocka_unit_test(test_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
