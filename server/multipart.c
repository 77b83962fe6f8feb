/* multipart.c — strict multipart/form-data (multipart.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "multipart.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "log.h"

/* RFC 2046 bchars (space allowed, but not last). */
static int bchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || strchr("'()+_,-./:=? ", c) != NULL;
}

/* RFC 9110 tchar. */
static int tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *skip_ows(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    return p;
}

/* One parameter "; name=value" at *pp (within [.., end)): the name into name[namecap], the value
 * (unquoted, escapes resolved) into val[valcap]. 1 on a parameter, 0 at the end, -1 on bad syntax
 * or a value too long. */
static int next_param(const char **pp, const char *end, char *name, size_t namecap, char *val, size_t valcap, char *err,
                      size_t errlen)
{
    const char *p = skip_ows(*pp, end);
    if (p == end) return 0;
    if (*p != ';') return log_err(err, errlen, "expected ';' between parameters");
    p = skip_ows(p + 1, end);
    if (p == end) return 0; /* a trailing ';' is tolerated, as browsers and curl never send one anyway */
    size_t n = 0;
    while (p < end && tchar((unsigned char)*p)) {
        if (n + 1 >= namecap) return log_err(err, errlen, "parameter name too long");
        name[n++] = *p++;
    }
    name[n] = 0;
    if (!n) return log_err(err, errlen, "expected a parameter name");
    p = skip_ows(p, end);
    if (p == end || *p != '=') return log_err(err, errlen, "parameter '%s' has no value", name);
    p = skip_ows(p + 1, end);
    size_t k = 0;
    if (p < end && *p == '"') {
        p++;
        for (;;) {
            if (p == end) return log_err(err, errlen, "parameter '%s': unterminated quoted string", name);
            unsigned char c = (unsigned char)*p;
            if (c == '"') {
                p++;
                break;
            }
            if (c == '\\') {
                if (++p == end) return log_err(err, errlen, "parameter '%s': unterminated quoted string", name);
                c = (unsigned char)*p;
            }
            if ((c < 0x20 && c != '\t') || c == 0x7f) return log_err(err, errlen, "parameter '%s': control character in its value", name);
            if (k + 1 >= valcap) return log_err(err, errlen, "parameter '%s': value longer than %zu bytes", name, valcap - 1);
            val[k++] = (char)c;
            p++;
        }
    } else {
        while (p < end && tchar((unsigned char)*p)) {
            if (k + 1 >= valcap) return log_err(err, errlen, "parameter '%s': value longer than %zu bytes", name, valcap - 1);
            val[k++] = *p++;
        }
        if (!k) return log_err(err, errlen, "parameter '%s' has an empty or malformed value", name);
    }
    val[k] = 0;
    *pp = p;
    return 1;
}

int mp_boundary(const char *content_type, char *out, char *err, size_t errlen)
{
    if (!content_type) return log_err(err, errlen, "no Content-Type");
    const char *end = content_type + strlen(content_type);
    const char *p = skip_ows(content_type, end);
    static const char mt[] = "multipart/form-data";
    if ((size_t)(end - p) < sizeof mt - 1 || strncasecmp(p, mt, sizeof mt - 1) != 0 ||
        (p[sizeof mt - 1] && p[sizeof mt - 1] != ';' && p[sizeof mt - 1] != ' ' && p[sizeof mt - 1] != '\t'))
        return log_err(err, errlen, "Content-Type must be multipart/form-data");
    p += sizeof mt - 1;
    char name[64], val[MP_BOUNDARY_MAX + 2];
    int found = 0, r;
    char perr[160];
    while ((r = next_param(&p, end, name, sizeof name, val, sizeof val, perr, sizeof perr)) == 1) {
        if (strcasecmp(name, "boundary") != 0) continue;
        if (found) return log_err(err, errlen, "Content-Type has two boundary parameters");
        found = 1;
        size_t n = strlen(val);
        if (n < 1 || n > MP_BOUNDARY_MAX) return log_err(err, errlen, "the multipart boundary must be 1 to %d characters", MP_BOUNDARY_MAX);
        for (size_t i = 0; i < n; i++)
            if (!bchar((unsigned char)val[i])) return log_err(err, errlen, "the multipart boundary has a character RFC 2046 does not allow");
        if (val[n - 1] == ' ') return log_err(err, errlen, "the multipart boundary must not end with a space");
        memcpy(out, val, n + 1);
    }
    if (r < 0) return log_err(err, errlen, "Content-Type: %s", perr);
    if (!found) return log_err(err, errlen, "Content-Type multipart/form-data needs a boundary parameter");
    return 0;
}

/* The part headers from *pp up to and including the empty line. */
static int parse_headers(const char **pp, const char *end, mp_part *part, char *err, size_t errlen)
{
    const char *p = *pp;
    int lines = 0, has_cd = 0, has_ct = 0;
    for (;;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p) < MP_HEADER_LINE_MAX + 2 ? (size_t)(end - p) : MP_HEADER_LINE_MAX + 2);
        if (!eol) {
            if ((size_t)(end - p) >= MP_HEADER_LINE_MAX + 2) return log_err(err, errlen, "a part header line is longer than %d bytes", MP_HEADER_LINE_MAX);
            return log_err(err, errlen, "the body ends inside a part's headers");
        }
        if (eol == p || eol[-1] != '\r') return log_err(err, errlen, "a part header line ends with a bare LF (CRLF required)");
        const char *le = eol - 1; /* the line is [p, le) */
        if (memchr(p, '\r', (size_t)(le - p))) return log_err(err, errlen, "a bare CR in a part header");
        if (le == p) { /* the empty line */
            *pp = eol + 1;
            break;
        }
        if (++lines > MP_HEADER_LINES_MAX) return log_err(err, errlen, "a part has more than %d header lines", MP_HEADER_LINES_MAX);
        if (*p == ' ' || *p == '\t') return log_err(err, errlen, "folded part header lines are not allowed");
        const char *colon = p;
        while (colon < le && tchar((unsigned char)*colon)) colon++;
        if (colon == p || colon == le || *colon != ':') return log_err(err, errlen, "malformed part header line");
        size_t hn = (size_t)(colon - p);
        const char *v = skip_ows(colon + 1, le), *ve = le;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        for (const char *q = v; q < ve; q++)
            if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f) return log_err(err, errlen, "control character in a part header");
        if (hn == 19 && strncasecmp(p, "Content-Disposition", hn) == 0) {
            if (has_cd++) return log_err(err, errlen, "a part has two Content-Disposition headers");
            static const char fd[] = "form-data";
            if ((size_t)(ve - v) < sizeof fd - 1 || strncasecmp(v, fd, sizeof fd - 1) != 0 ||
                (v + sizeof fd - 1 < ve && v[sizeof fd - 1] != ';' && v[sizeof fd - 1] != ' ' && v[sizeof fd - 1] != '\t'))
                return log_err(err, errlen, "a part's Content-Disposition must be form-data");
            const char *q = v + sizeof fd - 1;
            char pname[32], pval[MP_FILENAME_MAX], perr[160];
            int has_name = 0, r;
            while ((r = next_param(&q, ve, pname, sizeof pname, pval, sizeof pval, perr, sizeof perr)) == 1) {
                if (strcasecmp(pname, "name") == 0) {
                    if (has_name++) return log_err(err, errlen, "Content-Disposition has two name parameters");
                    if (strlen(pval) >= MP_NAME_MAX) return log_err(err, errlen, "a field name is longer than %d bytes", MP_NAME_MAX - 1);
                    strcpy(part->name, pval);
                } else if (strcasecmp(pname, "filename") == 0) {
                    if (part->has_filename++) return log_err(err, errlen, "Content-Disposition has two filename parameters");
                    strcpy(part->filename, pval);
                }
                /* other parameters (filename*, RFC 7578 4.2 says not to send it) are ignored */
            }
            if (r < 0) return log_err(err, errlen, "Content-Disposition: %s", perr);
            if (!has_name || !part->name[0]) return log_err(err, errlen, "a part's Content-Disposition has no name");
        } else if (hn == 12 && strncasecmp(p, "Content-Type", hn) == 0) {
            if (has_ct++) return log_err(err, errlen, "a part has two Content-Type headers");
            if ((size_t)(ve - v) >= MP_CTYPE_MAX) return log_err(err, errlen, "a part's Content-Type is longer than %d bytes", MP_CTYPE_MAX - 1);
            memcpy(part->content_type, v, (size_t)(ve - v));
            part->content_type[ve - v] = 0;
        } else if (hn == 25 && strncasecmp(p, "Content-Transfer-Encoding", hn) == 0) {
            size_t vn = (size_t)(ve - v);
            if (!((vn == 6 && !strncasecmp(v, "binary", 6)) || (vn == 4 && !strncasecmp(v, "8bit", 4)) ||
                  (vn == 4 && !strncasecmp(v, "7bit", 4))))
                return log_err(err, errlen, "Content-Transfer-Encoding other than binary is not supported (RFC 7578 4.7)");
        }
        /* other part headers are ignored */
        p = eol + 1;
    }
    if (!has_cd) return log_err(err, errlen, "a part has no Content-Disposition header");
    return 0;
}

/* After a dash-boundary at *pp: 1 for the close delimiter ("--"), 0 for padding + CRLF (a part
 * follows), -1 otherwise. */
static int after_delimiter(const char **pp, const char *end, char *err, size_t errlen)
{
    const char *p = *pp;
    if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
        *pp = p + 2;
        return 1;
    }
    p = skip_ows(p, end);
    if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') {
        *pp = p + 2;
        return 0;
    }
    if (p == end) return log_err(err, errlen, "the multipart body ends after a boundary, without its closing \"--\"");
    return log_err(err, errlen, "a multipart boundary is followed by something other than CRLF or \"--\"");
}

int mp_parse(const char *body, size_t len, const char *boundary, mp_part *parts, int max_parts, int *n, char *err, size_t errlen)
{
    *n = 0;
    size_t bn = strlen(boundary);
    if (bn < 1 || bn > MP_BOUNDARY_MAX) return log_err(err, errlen, "bad multipart boundary");
    char delim[MP_BOUNDARY_MAX + 4]; /* CRLF "--" boundary */
    memcpy(delim, "\r\n--", 4);
    memcpy(delim + 4, boundary, bn);
    size_t dn = bn + 4;
    const char *p = body, *end = body + len;
    /* The first delimiter: at the very start (no preamble), or after a preamble ending in CRLF. */
    if (len >= dn - 2 && memcmp(body, delim + 2, dn - 2) == 0) {
        p = body + dn - 2;
    } else {
        const char *d = len ? memmem(body, len, delim, dn) : NULL;
        if (!d) return log_err(err, errlen, "the multipart body does not contain its boundary");
        p = d + dn;
    }
    int r = after_delimiter(&p, end, err, errlen);
    while (r == 0) {
        if (*n >= max_parts) return log_err(err, errlen, "more than %d parts in the multipart body", max_parts);
        mp_part *part = &parts[*n];
        memset(part, 0, sizeof *part);
        if (parse_headers(&p, end, part, err, errlen)) return -1;
        const char *d = p < end ? memmem(p, (size_t)(end - p), delim, dn) : NULL;
        if (!d) return log_err(err, errlen, "the multipart body ends without its closing boundary");
        part->data = p;
        part->len = (size_t)(d - p);
        (*n)++;
        p = d + dn;
        r = after_delimiter(&p, end, err, errlen);
    }
    return r < 0 ? -1 : 0; /* after the close delimiter: the epilogue, ignored */
}
