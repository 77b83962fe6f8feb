/* multipart.h — a strict multipart/form-data parser (RFC 2046 section 5.1.1, RFC 7578) over a body
 * held in memory. Parts point into the body (nothing is copied but the few header values kept).
 * Refused, each with a one-line message: a boundary parameter that is missing, empty, longer than 70
 * characters or outside RFC 2046's bchars; a body that does not start with the boundary (after an
 * optional preamble ending in CRLF); bare-LF line endings in part headers; a part without
 * `Content-Disposition: form-data; name="..."`, with a repeated parameter, or with a
 * Content-Transfer-Encoding other than 7bit / 8bit / binary; header lines or parameter values over
 * their caps; more than max_parts parts; a delimiter followed by anything but transport padding and
 * CRLF or "--"; a body that ends before its closing delimiter (a boundary that never ends).
 * The preamble and the epilogue are ignored, as RFC 2046 says.
 * Thread-safe: no shared state; no allocation. */
#ifndef SRV_MULTIPART_H
#define SRV_MULTIPART_H

#include <stddef.h>

#define MP_BOUNDARY_MAX 70    /* RFC 2046 */
#define MP_NAME_MAX 128       /* a field name, NUL included */
#define MP_FILENAME_MAX 256   /* a file name, NUL included (longer ones are refused) */
#define MP_CTYPE_MAX 128      /* a part's Content-Type, NUL included */
#define MP_HEADER_LINE_MAX 1024
#define MP_HEADER_LINES_MAX 16

typedef struct {
    char name[MP_NAME_MAX];         /* the form field's name */
    char filename[MP_FILENAME_MAX]; /* "" unless has_filename */
    int has_filename;               /* the part carried filename="..." (a file upload) */
    char content_type[MP_CTYPE_MAX];/* the part's Content-Type, "" when absent */
    const char *data;               /* the part's content, inside the body */
    size_t len;
} mp_part;

/* The boundary of a Content-Type value "multipart/form-data; boundary=..." (quoted or not) into out
 * (at least MP_BOUNDARY_MAX + 1 bytes). 0, or -1 with err set (also when the type is not
 * multipart/form-data). */
int mp_boundary(const char *content_type, char *out, char *err, size_t errlen);

/* Splits body[0, len) into at most max_parts parts. 0 with *n set, or -1 with err set. */
int mp_parse(const char *body, size_t len, const char *boundary, mp_part *parts, int max_parts, int *n, char *err,
             size_t errlen);

#endif
