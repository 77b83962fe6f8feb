/* test_ws.c — server/ws.c: SHA-1 against FIPS 180 vectors, Sec-WebSocket-Accept against RFC 6455's
 * example, UTF-8 validation, and the frame parser: messages the same whether fed at once or byte by
 * byte, fragments with control frames between them, and each protocol violation with its close code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ws.h"

static void hex(const unsigned char *d, char *out)
{
    for (int i = 0; i < 20; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_sha1(void **state)
{
    (void)state;
    struct {
        const char *in;
        const char *want;
    } v[] = {
        {"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
        {"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"},
    };
    char h[41];
    unsigned char d[20];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ws_sha1(v[i].in, strlen(v[i].in), d);
        hex(d, h);
        assert_string_equal(h, v[i].want);
    }
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    ws_sha1(a, 1000000, d);
    hex(d, h);
    assert_string_equal(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    free(a);
    char acc[29];
    ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", acc); /* RFC 6455 section 1.3 */
    assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(ws_utf8_valid((const unsigned char *)"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
    const char *bad[] = {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "\xc3", "\xe2\x82"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_false(ws_utf8_valid((const unsigned char *)bad[i], strlen(bad[i])));
}

typedef struct {
    char log[4096];
    size_t n;
} sink;

static int on_msg(void *u, int op, const unsigned char *d, size_t len)
{
    sink *s = u;
    s->n += (size_t)snprintf(s->log + s->n, sizeof s->log - s->n, "M%d:%.*s|", op, (int)len, (const char *)d);
    return 0;
}

static int on_ctl(void *u, int op, const unsigned char *d, size_t len)
{
    sink *s = u;
    s->n += (size_t)snprintf(s->log + s->n, sizeof s->log - s->n, "C%d:%.*s|", op, (int)len, (const char *)d);
    return 0;
}

static const ws_callbacks cb = {on_msg, on_ctl};

/* A masked client frame. */
static size_t frame(unsigned char *out, int op, int fin, const char *p, size_t n, int masked, int rsv)
{
    size_t o = 0;
    out[o++] = (unsigned char)((fin ? 0x80 : 0) | rsv | op);
    unsigned char mb = masked ? 0x80 : 0;
    if (n < 126) out[o++] = (unsigned char)(mb | n);
    else {
        out[o++] = mb | 126;
        out[o++] = (unsigned char)(n >> 8);
        out[o++] = (unsigned char)n;
    }
    unsigned char k[4] = {0x12, 0x34, 0x56, 0x78};
    if (masked) memcpy(out + o, k, 4), o += 4;
    for (size_t i = 0; i < n; i++) out[o + i] = (unsigned char)p[i] ^ (masked ? k[i & 3] : 0);
    return o + n;
}

static void test_parser_pieces(void **state)
{
    (void)state;
    unsigned char buf[2048];
    size_t n = 0;
    char big[300];
    memset(big, 'x', sizeof big);
    n += frame(buf + n, WS_OP_TEXT, 0, "hel", 3, 1, 0);
    n += frame(buf + n, WS_OP_PING, 1, "p", 1, 1, 0);
    n += frame(buf + n, WS_OP_CONT, 1, "lo", 2, 1, 0);
    n += frame(buf + n, WS_OP_BINARY, 1, big, sizeof big, 1, 0);
    n += frame(buf + n, WS_OP_CLOSE, 1, "\x03\xe8", 2, 1, 0);
    sink a = {{0}, 0}, b = {{0}, 0};
    ws_parser p;
    ws_parser_init(&p, 1 << 16);
    assert_int_equal(ws_parse(&p, buf, n, &cb, &a), n);
    assert_false(p.failed);
    ws_parser_free(&p);
    ws_parser_init(&p, 1 << 16);
    for (size_t i = 0; i < n; i++) assert_int_equal(ws_parse(&p, buf + i, 1, &cb, &b), 1);
    ws_parser_free(&p);
    assert_string_equal(a.log, b.log);
    assert_non_null(strstr(a.log, "C9:p|M1:hello|M2:xxx"));
}

static void expect_fail(const unsigned char *buf, size_t n, size_t max, unsigned code)
{
    sink s = {{0}, 0};
    ws_parser p;
    ws_parser_init(&p, max);
    ws_parse(&p, buf, n, &cb, &s);
    assert_true(p.failed);
    assert_int_equal(p.close_code, code);
    assert_non_null(p.reason);
    ws_parser_free(&p);
}

static void test_parser_violations(void **state)
{
    (void)state;
    unsigned char buf[4096];
    char big[2000];
    memset(big, 'y', sizeof big);
    expect_fail(buf, frame(buf, WS_OP_TEXT, 1, "a", 1, 0, 0), 1024, WS_CLOSE_PROTOCOL);        /* unmasked */
    expect_fail(buf, frame(buf, WS_OP_TEXT, 1, "a", 1, 1, 0x40), 1024, WS_CLOSE_PROTOCOL);     /* RSV1 */
    expect_fail(buf, frame(buf, 0x3, 1, "a", 1, 1, 0), 1024, WS_CLOSE_PROTOCOL);               /* opcode */
    expect_fail(buf, frame(buf, WS_OP_CONT, 1, "a", 1, 1, 0), 1024, WS_CLOSE_PROTOCOL);        /* nothing begun */
    expect_fail(buf, frame(buf, WS_OP_PING, 0, "a", 1, 1, 0), 1024, WS_CLOSE_PROTOCOL);        /* fragmented ping */
    expect_fail(buf, frame(buf, WS_OP_PING, 1, big, 126, 1, 0), 1024, WS_CLOSE_PROTOCOL);      /* long ping */
    expect_fail(buf, frame(buf, WS_OP_BINARY, 1, big, sizeof big, 1, 0), 1024, WS_CLOSE_TOO_BIG);
    size_t n = frame(buf, WS_OP_BINARY, 0, big, 700, 1, 0);
    n += frame(buf + n, WS_OP_CONT, 1, big, 700, 1, 0);
    expect_fail(buf, n, 1024, WS_CLOSE_TOO_BIG); /* the fragments together */
    n = frame(buf, WS_OP_TEXT, 0, "a", 1, 1, 0);
    n += frame(buf + n, WS_OP_TEXT, 1, "b", 1, 1, 0);
    expect_fail(buf, n, 1024, WS_CLOSE_PROTOCOL); /* a new message inside one */
    expect_fail(buf, frame(buf, WS_OP_TEXT, 1, "\xc3\x28", 2, 1, 0), 1024, WS_CLOSE_INVALID_DATA);
    n = frame(buf, WS_OP_TEXT, 0, "\xc3", 1, 1, 0); /* a character split over fragments is fine */
    n += frame(buf + n, WS_OP_CONT, 1, "\xa9", 1, 1, 0);
    sink s = {{0}, 0};
    ws_parser p;
    ws_parser_init(&p, 1024);
    ws_parse(&p, buf, n, &cb, &s);
    assert_false(p.failed);
    assert_string_equal(s.log, "M1:\xc3\xa9|");
    ws_parser_free(&p);
    unsigned char h[10];
    assert_int_equal(ws_frame_header(h, WS_OP_TEXT, 5), 2);
    assert_int_equal(ws_frame_header(h, WS_OP_TEXT, 300), 4);
    assert_int_equal(ws_frame_header(h, WS_OP_BINARY, 70000), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sha1), cmocka_unit_test(test_utf8), cmocka_unit_test(test_parser_pieces),
                                       cmocka_unit_test(test_parser_violations)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
