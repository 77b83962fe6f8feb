/* http_parse.h — a strict HTTP/1.1 request-head parser and chunked-body decoder (RFC 9112), with no
 * I/O, so that the transport, the unit tests and the fuzzer all drive the same code.
 *
 * Strictness, deliberately beyond the RFC's "MAY accept": every line ends in CRLF (a bare LF or a CR
 * not followed by LF is 400), no obs-fold (a header line starting with SP/HTAB is 400), no
 * whitespace between a field name and its colon (400), one Content-Length (a second one is 400 even
 * when equal), Content-Length together with Transfer-Encoding is 400, any transfer coding other than
 * exactly one "chunked" is 501, Transfer-Encoding on HTTP/1.0 is 400, HTTP/1.1 without exactly one
 * Host is 400, versions other than 1.0 and 1.1 are 505, a long request line is 414, too many or too
 * large header lines are 431. Requests whose framing is in doubt must be answered and the connection
 * closed (hp_request.close is set for every error).
 * Thread-safety: no shared state. */
#ifndef SRV_HTTP_PARSE_H
#define SRV_HTTP_PARSE_H

#include <stddef.h>

#define HP_MAX_HEADERS 100         /* header lines per request at most (431 beyond) */
#define HP_MAX_REQUEST_LINE 8192   /* bytes of the request line at most (414 beyond) */
#define HP_MAX_HEAD 32768          /* request line + headers at most (431 beyond) */
#define HP_MAX_CHUNK_LINE 4096     /* a chunk-size line with its extensions, or a trailer line */
#define HP_MAX_TRAILER 16384       /* the whole trailer section */

typedef enum { HP_INCOMPLETE = 0, HP_COMPLETE = 1, HP_ERROR = -1 } hp_status;

/* A protocol error: status (400, 414, 431, 501, 505, 417), machine code and message. */
typedef struct {
    unsigned status;
    const char *code;
    const char *message; /* static text */
} hp_error;

typedef struct {
    const char *name, *value; /* NUL-terminated, inside the parsed head; value trimmed of OWS */
} hp_header;

typedef enum { HP_GET = 0, HP_HEAD, HP_POST, HP_PUT, HP_DELETE, HP_OPTIONS, HP_PATCH, HP_OTHER } hp_method;

typedef struct {
    const char *method;  /* as sent (a token) */
    hp_method method_id;
    const char *target;  /* the request target as sent */
    const char *path;    /* target before '?' (NUL-terminated copy inside the head) */
    const char *query;   /* after '?', "" when none */
    int minor;           /* HTTP/1.<minor>, 0 or 1 */
    hp_header headers[HP_MAX_HEADERS];
    int n_headers;
    /* Framing and connection semantics, from the headers. */
    int has_length;
    unsigned long long content_length;
    int chunked;
    int keep_alive;      /* 1: the connection may carry another request after this one */
    int expect_continue; /* Expect: 100-continue */
} hp_request;

/* Incremental scan state for one head: zero it (hp_scan_init) before the first byte of a request. */
typedef struct {
    size_t pos;        /* bytes already scanned */
    size_t start;      /* where the request line starts (after leading empty lines) */
    size_t line_start; /* where the current line starts */
    int started;       /* the request line has begun */
    int line_done;     /* the request line has ended */
} hp_scan;

void hp_scan_init(hp_scan *s);

/* Looks for the end of a request head in buf[0..len) (buf grows between calls; the bytes already
 * scanned must not change). HP_COMPLETE with *head_len (the bytes up to and including the empty
 * line), HP_INCOMPLETE (need more bytes; nothing wrong so far), or HP_ERROR with *err (bare LF, stray
 * CR, request line or head over its limit), found as soon as the offending byte arrives. Leading
 * empty lines (CRLF) before the request line are allowed (RFC 9112 §2.2) and counted in *head_len.
 * Each byte is looked at once over all calls. Looks only at line endings and sizes; hp_parse_head
 * checks the rest. */
hp_status hp_scan_head(hp_scan *s, const char *buf, size_t len, size_t *head_len, hp_error *err);

/* Parses a complete head (as hp_scan_head delimited it) in place: NULs are written into head, and
 * req's strings point into it, so head must outlive req. 0, or -1 with *err. */
int hp_parse_head(char *head, size_t head_len, hp_request *req, hp_error *err);

/* The first header of that name (case-insensitive), or NULL. */
const char *hp_header_get(const hp_request *req, const char *name);

/* Case-insensitive search for token in a comma-separated list (e.g. Connection: keep-alive, close). */
int hp_list_has(const char *list, const char *token);

/* ---- chunked transfer coding ---- */

typedef struct {
    int state;
    unsigned long long left; /* data bytes left in the current chunk */
    size_t line;             /* bytes of the current size/trailer line so far */
    size_t trailer;          /* bytes of the trailer section so far */
    int saw_digit, in_ext;
    unsigned long long total;  /* decoded bytes so far */
} hp_chunked;

void hp_chunked_init(hp_chunked *c);

/* Decodes the next piece of in[0..len). Returns HP_INCOMPLETE when all of in was consumed and more is
 * needed, HP_COMPLETE when the body ended (the last chunk and the trailer section; bytes after
 * in[*used] belong to the next request), HP_ERROR on malformed framing (400, *err). Data found on the
 * way is passed to on_data, in order, as spans of in; on_data returning nonzero stops decoding at once
 * (HP_INCOMPLETE with *used after that span). */
typedef int (*hp_data_fn)(void *user, const char *data, size_t len);
hp_status hp_chunked_feed(hp_chunked *c, const char *in, size_t len, size_t *used, hp_data_fn on_data,
                          void *user, hp_error *err);

/* The reason phrase of a status code ("OK", "Not Found"...), "Unknown" for others. */
const char *hp_reason(unsigned status);

#endif
