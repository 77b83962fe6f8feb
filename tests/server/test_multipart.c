/* test_multipart — server/multipart.c: the boundary parameter, the body's framing (preamble,
 * transport padding, epilogue, boundary-like bytes inside a part), part headers, and every refusal
 * with its message; and the OpenAI form rules of server/transcriptions.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "multipart.h"
#include "transcriptions.h"

static void boundary_ok(const char *ct, const char *want)
{
    char b[MP_BOUNDARY_MAX + 1], err[200];
    if (mp_boundary(ct, b, err, sizeof err)) fail_msg("'%s': %s", ct, err);
    assert_string_equal(b, want);
}

static void boundary_bad(const char *ct, const char *msg)
{
    char b[MP_BOUNDARY_MAX + 1], err[200] = "";
    if (mp_boundary(ct, b, err, sizeof err) == 0) fail_msg("'%s' accepted", ct);
    if (!strstr(err, msg)) fail_msg("'%s': message '%s' lacks '%s'", ct, err, msg);
}

static void test_boundary(void **state)
{
    (void)state;
    boundary_ok("multipart/form-data; boundary=abc", "abc");
    boundary_ok("Multipart/Form-Data;boundary=\"a b:c\"", "a b:c");
    boundary_ok("multipart/form-data; charset=utf-8; BOUNDARY=------------------------d74496d66958873e",
                "------------------------d74496d66958873e");
    char seventy[160];
    snprintf(seventy, sizeof seventy, "multipart/form-data; boundary=%070d", 7);
    boundary_ok(seventy, seventy + 30);
    snprintf(seventy, sizeof seventy, "multipart/form-data; boundary=%071d", 7);
    boundary_bad(seventy, "1 to 70");
    boundary_bad("multipart/form-data", "needs a boundary");
    boundary_bad("multipart/form-data; boundary=", "empty or malformed");
    boundary_bad("multipart/form-data; boundary=\"\"", "1 to 70");
    boundary_bad("multipart/form-data; boundary=\"ab \"", "end with a space");
    boundary_bad("multipart/form-data; boundary=\"a\\\"b\"", "does not allow");
    boundary_bad("multipart/form-data; boundary=a; boundary=b", "two boundary");
    boundary_bad("multipart/mixed; boundary=a", "must be multipart/form-data");
    boundary_bad("multipart/form-datax; boundary=a", "must be multipart/form-data");
    boundary_bad("multipart/form-data; boundary=\"abc", "unterminated");
}

static int parse(const char *body, size_t len, mp_part *parts, int max, char *err)
{
    int n = -1;
    if (mp_parse(body, len, "XyZ", parts, max, &n, err, 200)) return -1;
    return n;
}

#define PART(name) "Content-Disposition: form-data; name=\"" name "\"\r\n"

static void test_framing(void **state)
{
    (void)state;
    mp_part p[4];
    char err[200];
    /* Preamble, transport padding after a delimiter, a part whose data holds "--XyZ" not at a line
     * start and "\r\n--XyZ" followed by more boundary characters... which RFC 2046 forbids: refused. */
    static const char body[] = "preamble line\r\n--XyZ \t\r\n" PART("a") "\r\none --XyZ two\r\n--XyZ\r\n" PART("file")
                               "Content-Type: audio/wav\r\nX-Other: ignored\r\n\r\n\r\n\r\n--XyZ--\r\nepilogue --XyZ";
    assert_int_equal(parse(body, sizeof body - 1, p, 4, err), 2);
    assert_string_equal(p[0].name, "a");
    assert_int_equal(p[0].len, strlen("one --XyZ two"));
    assert_memory_equal(p[0].data, "one --XyZ two", p[0].len);
    assert_string_equal(p[1].name, "file");
    assert_string_equal(p[1].content_type, "audio/wav");
    assert_int_equal(p[1].len, 2); /* the data is "\r\n" */
    assert_int_equal(p[1].has_filename, 0);
    /* An empty form (close delimiter at once). */
    assert_int_equal(parse("--XyZ--", 7, p, 4, err), 0);
    /* filename, quoted escapes, unquoted values, ignored filename* */
    static const char f[] = "--XyZ\r\nContent-Disposition: form-data; name=file; filename=\"a\\\"b.wav\"; filename*=utf-8''x\r\n\r\nDATA\r\n--XyZ--";
    assert_int_equal(parse(f, sizeof f - 1, p, 4, err), 1);
    assert_string_equal(p[0].filename, "a\"b.wav");
    assert_int_equal(p[0].has_filename, 1);
    assert_memory_equal(p[0].data, "DATA", 4);
}

static void bad(const char *body, int max, const char *msg)
{
    mp_part p[4];
    char err[200] = "";
    if (parse(body, strlen(body), p, max, err) >= 0) fail_msg("accepted: %s", body);
    if (!strstr(err, msg)) fail_msg("message '%s' lacks '%s' for: %s", err, msg, body);
}

static void test_refusals(void **state)
{
    (void)state;
    bad("", 4, "does not contain its boundary");
    bad("no boundary here", 4, "does not contain its boundary");
    bad("--XyZ", 4, "without its closing");
    bad("--XyZ\r\n" PART("a") "\r\nvalue that never ends", 4, "ends without its closing boundary");
    bad("--XyZ\r\n" PART("a") "\r\nv\r\n--XyZ", 4, "without its closing");
    bad("--XyZX\r\n", 4, "followed by something other than CRLF");
    bad("--XyZ\r\n" PART("a") "\r\nv\r\n--XyZabc\r\n--XyZ--", 4, "followed by something other than CRLF");
    bad("--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\r\n--XyZ--", 4, "other than CRLF");
    bad("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\n\r\nv\r\n--XyZ--", 4, "bare LF");
    bad("--XyZ\r\n" PART("a") " folded\r\n\r\nv\r\n--XyZ--", 4, "folded");
    bad("--XyZ\r\nContent-Type: text/plain\r\n\r\nv\r\n--XyZ--", 4, "no Content-Disposition");
    bad("--XyZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nv\r\n--XyZ--", 4, "must be form-data");
    bad("--XyZ\r\nContent-Disposition: form-data\r\n\r\nv\r\n--XyZ--", 4, "has no name");
    bad("--XyZ\r\nContent-Disposition: form-data; name=\"a\"; name=\"b\"\r\n\r\nv\r\n--XyZ--", 4, "two name");
    bad("--XyZ\r\n" PART("a") PART("b") "\r\nv\r\n--XyZ--", 4, "two Content-Disposition");
    bad("--XyZ\r\n" PART("a") "Content-Transfer-Encoding: base64\r\n\r\nv\r\n--XyZ--", 4, "Content-Transfer-Encoding");
    bad("--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nv\r\n--XyZ--", 4, "unterminated quoted string");
    bad("--XyZ\r\nContent-Disposition: form-data; name=\"a\x01\"\r\n\r\nv\r\n--XyZ--", 4, "control character");
    bad("--XyZ\r\n" PART("a") "\r\n1\r\n--XyZ\r\n" PART("b") "\r\n2\r\n--XyZ--", 1, "more than 1 parts");
    bad("--XyZ\r\n" PART("a") "Bad Header\r\n\r\nv\r\n--XyZ--", 4, "malformed part header");
    bad("--XyZ\r\n" PART("a"), 4, "ends inside a part's headers");
    char big[4000];
    snprintf(big, sizeof big, "--XyZ\r\n" PART("a") "X-Long: %01100d\r\n\r\nv\r\n--XyZ--", 0);
    bad(big, 4, "longer than 1024");
    char many[2000] = "--XyZ\r\n" PART("a");
    for (int i = 0; i < 17; i++) strcat(many, "X-A: b\r\n");
    strcat(many, "\r\nv\r\n--XyZ--");
    bad(many, 4, "more than 16 header lines");
}

static void form(const char *fields, int n_fields, const char *code)
{
    /* fields: n_fields "name\0value\0" pairs; a name starting with '@' is a file */
    mp_part p[OAI_MAX_PARTS];
    memset(p, 0, sizeof p);
    const char *q = fields;
    for (int i = 0; i < n_fields; i++) {
        const char *name = q;
        q += strlen(q) + 1;
        if (name[0] == '@') {
            snprintf(p[i].name, sizeof p[i].name, "%s", name + 1);
            p[i].has_filename = 1;
            strcpy(p[i].filename, "a.wav");
        } else {
            snprintf(p[i].name, sizeof p[i].name, "%s", name);
        }
        p[i].data = q;
        p[i].len = strlen(q);
        q += strlen(q) + 1;
    }
    oai_request o;
    srv_err e = {0};
    int rc = oai_parse_form(p, n_fields, "en-char-small", &o, &e);
    if (!code) {
        if (rc) fail_msg("refused: %s", e.message);
        return;
    }
    if (!rc) fail_msg("accepted, wanted %s", code);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.code, code);
    assert_true(e.message[0]);
}

static void test_openai_form(void **state)
{
    (void)state;
    form("@file\0RIFF\0", 1, NULL);
    form("@file\0RIFF\0model\0whisper-1\0language\0en-US\0prompt\0x\0temperature\0 0.5\0", 5, "invalid_parameter");
    form("@file\0RIFF\0model\0en-char-small\0language\0English\0temperature\0" "0\0", 4, NULL);
    form("@file\0RIFF\0response_format\0verbose_json\0timestamp_granularities[]\0word\0timestamp_granularities[]\0segment\0", 4, NULL);
    form("model\0whisper-1\0", 1, "missing_file");
    form("@file\0a\0@file\0b\0", 2, "multiple_files");
    form("@file\0a\0@audio\0b\0", 2, "unexpected_file");
    form("@file\0a\0@model\0b\0", 2, "unexpected_file");
    form("@file\0a\0stream\0true\0", 2, "unknown_field");
    form("@file\0a\0model\0whisper-1\0model\0whisper-1\0", 3, "invalid_request");
    form("@file\0a\0model\0whisper-2\0", 2, "model_not_found");
    form("@file\0a\0language\0de\0", 2, "unsupported_language");
    form("@file\0a\0language\0eng\0", 2, "unsupported_language");
    form("@file\0a\0response_format\0xml\0", 2, "invalid_parameter");
    form("@file\0a\0timestamp_granularities[]\0word\0", 2, "invalid_parameter");
    form("@file\0a\0temperature\0nan\0", 2, "invalid_parameter");
    form("@file\0a\0temperature\0\0", 2, "invalid_parameter");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_boundary), cmocka_unit_test(test_framing), cmocka_unit_test(test_refusals),
                                       cmocka_unit_test(test_openai_form)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
