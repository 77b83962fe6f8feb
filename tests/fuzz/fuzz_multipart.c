/* fuzz_multipart — the strict multipart/form-data parser (server/multipart.c) on arbitrary bytes.
 * Input: a Content-Type value up to the first '\n', then the body. If the Content-Type gives no
 * boundary, the body is parsed with the boundary "X-b0undary" so the body parser is fuzzed either way.
 * Properties: every rejection has a message; an accepted boundary is 1-70 RFC 2046 bchars not ending
 * in a space; on success at most max_parts parts, each with a non-empty NUL-terminated name, its data
 * inside the body, in order and not overlapping, preceded by the delimiter; parsing is deterministic.
 *
 * Registered in tests/fuzz/targets.cmake (ctest label fuzz); longer runs: tests/fuzz/run.sh multipart SECONDS. */
#include "fuzz_util.h"
#include "multipart.h"

#define MAX_PARTS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t ctn = nl ? (size_t)(nl - data) : 0;
    char *ct = malloc(ctn + 1);
    if (!ct) abort();
    memcpy(ct, data, ctn);
    ct[ctn] = 0;
    /* The body in its own allocation, so ASan sees any read past it. */
    size_t len = nl ? size - ctn - 1 : size;
    char *body = malloc(len ? len : 1);
    if (!body) abort();
    memcpy(body, nl ? (const char *)nl + 1 : (const char *)data, len);

    char boundary[MP_BOUNDARY_MAX + 1], err[256];
    err[0] = 0;
    if (mp_boundary(ct, boundary, err, sizeof err) == 0) {
        size_t bn = strlen(boundary);
        FUZZ_CHECK(bn >= 1 && bn <= MP_BOUNDARY_MAX, "boundary of %zu chars", bn);
        FUZZ_CHECK(boundary[bn - 1] != ' ', "boundary ends in a space");
        for (size_t i = 0; i < bn; i++)
            FUZZ_CHECK(boundary[i] >= 0x20 && boundary[i] < 0x7f && boundary[i] != '"' && boundary[i] != ';', "bad bchar 0x%02x",
                       (unsigned char)boundary[i]);
    } else {
        fuzz_check_message(err, sizeof err);
        strcpy(boundary, "X-b0undary");
    }
    mp_part parts[MAX_PARTS], again[MAX_PARTS];
    int n = -1, n2 = -1;
    err[0] = 0;
    int rc = mp_parse(body, len, boundary, parts, MAX_PARTS, &n, err, sizeof err);
    char err2[256];
    int rc2 = mp_parse(body, len, boundary, again, MAX_PARTS, &n2, err2, sizeof err2);
    FUZZ_CHECK(rc == rc2 && (rc || n == n2), "not deterministic");
    if (rc) {
        fuzz_check_message(err, sizeof err);
        FUZZ_CHECK(!strcmp(err, err2), "different messages");
    } else {
        FUZZ_CHECK(n >= 0 && n <= MAX_PARTS, "%d parts", n);
        size_t bn = strlen(boundary);
        const char *prev_end = body;
        for (int i = 0; i < n; i++) {
            const mp_part *p = &parts[i];
            FUZZ_CHECK(memchr(p->name, 0, sizeof p->name) && p->name[0], "part %d: bad name", i);
            FUZZ_CHECK(memchr(p->filename, 0, sizeof p->filename), "part %d: filename not terminated", i);
            FUZZ_CHECK(memchr(p->content_type, 0, sizeof p->content_type), "part %d: content type not terminated", i);
            FUZZ_CHECK(p->has_filename || !p->filename[0], "part %d: a filename without has_filename", i);
            FUZZ_CHECK(p->data >= prev_end && p->data + p->len <= body + len, "part %d: data outside the body", i);
            /* each part's data is followed by CRLF "--" boundary */
            FUZZ_CHECK((size_t)(body + len - (p->data + p->len)) >= bn + 4 && !memcmp(p->data + p->len, "\r\n--", 4) &&
                           !memcmp(p->data + p->len + 4, boundary, bn),
                       "part %d: not followed by its delimiter", i);
            FUZZ_CHECK(!memcmp(&parts[i], &again[i], sizeof parts[i]), "part %d differs between runs", i);
            prev_end = p->data + p->len;
        }
    }
    free(ct);
    free(body);
    return 0;
}
