/* result_text.h — the transcription result document written straight to text: the same bytes as
 * json_dumps(reply_result_json(...), REPLY_JSON_FLAGS) plus reply_json's newline, without building a
 * jansson tree (one object and four allocations per token; on a loop thread that was about half of a
 * request's CPU for a 10 s answer of ~170 tokens). The jansson path stays the reference
 * (tests/server/test_result_text.c compares the two byte for byte) and the fallback: NULL here means
 * "use reply_result_json" (out of memory, a non-finite number or invalid UTF-8, which jansson refuses).
 * Thread-safety: reads its arguments only. */
#ifndef SRV_RESULT_TEXT_H
#define SRV_RESULT_TEXT_H
#include <stddef.h>

#include "reply.h"

/* The document and its length (malloc'd, NUL-terminated, ending in '\n'), or NULL. */
char *result_text(const rnnt_model *m, const rnnt_result *res, const reply_result_info *ri, size_t *len);

/* A growing text buffer and the writers of JSON values, as jansson's dump writes them (for the tests). */
typedef struct {
    char *p;
    size_t len, cap;
    int failed; /* out of memory, non-finite number or invalid UTF-8: the text is unusable */
} rt_buf;
void rt_string(rt_buf *b, const char *s); /* "..." with jansson's escapes; invalid UTF-8 fails */
void rt_real(rt_buf *b, double v);        /* jansson's real at precision 7 (REPLY_JSON_FLAGS) */
void rt_free(rt_buf *b);

#endif
