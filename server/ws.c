/* ws.c — RFC 6455 without I/O (see ws.h). SHA-1 is written here (the daemon links no crypto
 * library; the handshake needs only this one digest); tests/server/test_ws.c checks it against FIPS
 * 180 vectors and the RFC's handshake example. */
#include "ws.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- SHA-1 ---- */

static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void sha1_block(uint32_t h[5], const unsigned char *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) f = (bb & c) | (~bb & d), k = 0x5A827999;
        else if (i < 40) f = bb ^ c ^ d, k = 0x6ED9EBA1;
        else if (i < 60) f = (bb & c) | (bb & d) | (c & d), k = 0x8F1BBCDC;
        else f = bb ^ c ^ d, k = 0xCA62C1D6;
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(bb, 30);
        bb = a;
        a = t;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void ws_sha1(const void *data, size_t len, unsigned char out[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const unsigned char *p = data;
    size_t left = len;
    while (left >= 64) {
        sha1_block(h, p);
        p += 64;
        left -= 64;
    }
    unsigned char last[128] = {0};
    memcpy(last, p, left);
    last[left] = 0x80;
    size_t n = left + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) last[n - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha1_block(h, last);
    if (n == 128) sha1_block(h, last + 64);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (unsigned char)(h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(h[i] >> 8);
        out[4 * i + 3] = (unsigned char)h[i];
    }
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void ws_accept_key(const char *key, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char buf[128];
    size_t kl = strlen(key);
    if (kl > sizeof buf - sizeof guid) kl = sizeof buf - sizeof guid;
    memcpy(buf, key, kl);
    memcpy(buf + kl, guid, sizeof guid - 1);
    unsigned char d[21] = {0};
    ws_sha1(buf, kl + sizeof guid - 1, d);
    int o = 0;
    for (int i = 0; i < 21; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = b64[v & 63];
    }
    out[27] = '='; /* 20 bytes: the last group holds two bytes */
    out[28] = 0;
}

/* A Sec-WebSocket-Key must decode to 16 bytes: 22 base64 characters and "==". */
static int key_ok(const char *k)
{
    if (strlen(k) != 24 || strcmp(k + 22, "==") != 0) return 0;
    for (int i = 0; i < 22; i++)
        if (!strchr(b64, k[i]) || !k[i]) return 0;
    return strchr("AQgw", k[21]) != NULL; /* the unused low bits are zero */
}

unsigned ws_check_upgrade(const hp_request *req, char accept[29], const char **why)
{
    const char *up = hp_header_get(req, "Upgrade"), *conn = hp_header_get(req, "Connection");
    const char *ver = hp_header_get(req, "Sec-WebSocket-Version"), *key = hp_header_get(req, "Sec-WebSocket-Key");
    if (req->method_id != HP_GET) return *why = "a WebSocket upgrade must be a GET", 400;
    if (req->minor != 1) return *why = "a WebSocket upgrade needs HTTP/1.1", 400;
    if (req->has_length && req->content_length > 0) return *why = "a WebSocket upgrade has no body", 400;
    if (req->chunked) return *why = "a WebSocket upgrade has no body", 400;
    if (!up || !hp_list_has(up, "websocket")) return *why = "this endpoint is a WebSocket: send Upgrade: websocket", 400;
    if (!conn || !hp_list_has(conn, "upgrade")) return *why = "a WebSocket upgrade needs Connection: Upgrade", 400;
    if (!ver || strcmp(ver, "13") != 0) return *why = "Sec-WebSocket-Version must be 13", 426;
    if (!key || !key_ok(key)) return *why = "Sec-WebSocket-Key must be 16 bytes in base64", 400;
    ws_accept_key(key, accept);
    return 0;
}

/* ---- UTF-8 (RFC 3629) ---- */

int ws_utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;      /* overlong */
            else if (c == 0xED) hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F; /* > U+10FFFF */
        } else
            return 0;
        if (n - i < (size_t)len) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += (size_t)len;
    }
    return 1;
}

/* ---- frames ---- */

size_t ws_frame_header(unsigned char out[10], int opcode, uint64_t len)
{
    out[0] = (unsigned char)(0x80 | (opcode & 0x0F));
    if (len < 126) {
        out[1] = (unsigned char)len;
        return 2;
    }
    if (len <= 0xFFFF) {
        out[1] = 126;
        out[2] = (unsigned char)(len >> 8);
        out[3] = (unsigned char)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++) out[2 + i] = (unsigned char)(len >> (56 - 8 * i));
    return 10;
}

void ws_parser_init(ws_parser *p, size_t max_message)
{
    memset(p, 0, sizeof *p);
    p->max_message = max_message;
    p->hdr_need = 2;
}

void ws_parser_free(ws_parser *p)
{
    free(p->msg);
    p->msg = NULL;
    p->msg_cap = p->msg_len = 0;
}

static size_t fail(ws_parser *p, unsigned code, const char *reason, size_t used)
{
    p->failed = 1;
    p->close_code = code;
    p->reason = reason;
    return used;
}

/* The header is complete: check it. 0 ok, -1 failed (p->failed set). */
static int header_done(ws_parser *p)
{
    const unsigned char *h = p->hdr;
    p->fin = h[0] >> 7;
    p->opcode = h[0] & 0x0F;
    p->masked = h[1] >> 7;
    uint64_t len = h[1] & 0x7F;
    int o = 2;
    if (len == 126) {
        len = (uint64_t)h[2] << 8 | h[3];
        if (len < 126) return fail(p, WS_CLOSE_PROTOCOL, "a length in more bytes than needed", 0), -1;
        o = 4;
    } else if (len == 127) {
        len = 0;
        for (int i = 0; i < 8; i++) len = len << 8 | h[2 + i];
        if (len >> 63) return fail(p, WS_CLOSE_PROTOCOL, "a frame length with the high bit set", 0), -1;
        if (len <= 0xFFFF) return fail(p, WS_CLOSE_PROTOCOL, "a length in more bytes than needed", 0), -1;
        o = 10;
    }
    memcpy(p->mask, h + o, 4);
    p->payload_len = len;
    p->payload_got = 0;
    if (h[0] & 0x70) return fail(p, WS_CLOSE_PROTOCOL, "reserved bits set (no extension was agreed)", 0), -1;
    if (!p->masked) return fail(p, WS_CLOSE_PROTOCOL, "client frames must be masked", 0), -1;
    switch (p->opcode) {
    case WS_OP_CLOSE:
    case WS_OP_PING:
    case WS_OP_PONG:
        if (!p->fin) return fail(p, WS_CLOSE_PROTOCOL, "a fragmented control frame", 0), -1;
        if (len > 125) return fail(p, WS_CLOSE_PROTOCOL, "a control frame over 125 bytes", 0), -1;
        return 0;
    case WS_OP_CONT:
        if (!p->msg_opcode) return fail(p, WS_CLOSE_PROTOCOL, "a continuation frame with no message begun", 0), -1;
        break;
    case WS_OP_TEXT:
    case WS_OP_BINARY:
        if (p->msg_opcode) return fail(p, WS_CLOSE_PROTOCOL, "a new message before the last one's final fragment", 0), -1;
        p->msg_opcode = p->opcode;
        p->msg_len = 0;
        break;
    default:
        return fail(p, WS_CLOSE_PROTOCOL, "an unknown opcode", 0), -1;
    }
    if (len > p->max_message - p->msg_len) return fail(p, WS_CLOSE_TOO_BIG, "message too big (streaming.max_message_bytes)", 0), -1;
    if (p->msg_len + len > p->msg_cap) {
        size_t cap = p->msg_cap ? p->msg_cap : 4096;
        while (cap < p->msg_len + len) cap *= 2;
        if (cap > p->max_message) cap = p->max_message;
        unsigned char *m = realloc(p->msg, cap);
        if (!m) return fail(p, WS_CLOSE_INTERNAL, "out of memory", 0), -1;
        p->msg = m;
        p->msg_cap = cap;
    }
    return 0;
}

/* The frame's payload is complete. Returns nonzero when a callback asked to stop. */
static int frame_done(ws_parser *p, const ws_callbacks *cb, void *user)
{
    int stop = 0;
    if (p->opcode >= 0x8) {
        if (p->opcode == WS_OP_CLOSE && p->payload_len >= 2 &&
            !ws_utf8_valid(p->ctl + 2, (size_t)p->payload_len - 2)) {
            fail(p, WS_CLOSE_INVALID_DATA, "a close reason that is not UTF-8", 0);
            return 1;
        }
        if (p->opcode == WS_OP_CLOSE && p->payload_len == 1) {
            fail(p, WS_CLOSE_PROTOCOL, "a close frame of one byte", 0);
            return 1;
        }
        stop = cb->on_control(user, p->opcode, p->ctl, (size_t)p->payload_len);
    } else {
        p->msg_len += (size_t)p->payload_len;
        if (p->fin) {
            int op = p->msg_opcode;
            p->msg_opcode = 0;
            if (op == WS_OP_TEXT && !ws_utf8_valid(p->msg, p->msg_len)) {
                fail(p, WS_CLOSE_INVALID_DATA, "a text message that is not UTF-8", 0);
                return 1;
            }
            stop = cb->on_message(user, op, p->msg, p->msg_len);
            p->msg_len = 0;
        }
    }
    p->hdr_len = 0;
    p->hdr_need = 2;
    return stop;
}

size_t ws_parse(ws_parser *p, const unsigned char *in, size_t len, const ws_callbacks *cb, void *user)
{
    size_t i = 0;
    while (i < len && !p->failed) {
        if (p->hdr_len < p->hdr_need) {
            p->hdr[p->hdr_len++] = in[i++];
            if (p->hdr_len == 2) {
                unsigned l7 = p->hdr[1] & 0x7F;
                p->hdr_need = 2 + (l7 == 126 ? 2 : l7 == 127 ? 8 : 0) + ((p->hdr[1] & 0x80) ? 4 : 0);
                if (!(p->hdr[1] & 0x80)) return fail(p, WS_CLOSE_PROTOCOL, "client frames must be masked", i);
            }
            if (p->hdr_len == p->hdr_need) {
                if (header_done(p)) return i;
                if (p->payload_len == 0 && frame_done(p, cb, user)) return i;
            }
            continue;
        }
        /* payload */
        size_t take = len - i;
        if ((uint64_t)take > p->payload_len - p->payload_got) take = (size_t)(p->payload_len - p->payload_got);
        unsigned char *dst = p->opcode >= 0x8 ? p->ctl + p->payload_got : p->msg + p->msg_len + p->payload_got;
        for (size_t k = 0; k < take; k++) dst[k] = in[i + k] ^ p->mask[(p->payload_got + k) & 3];
        p->payload_got += take;
        i += take;
        if (p->payload_got == p->payload_len && frame_done(p, cb, user)) return i;
    }
    return i;
}
