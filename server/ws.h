/* ws.h — the WebSocket protocol (RFC 6455) without I/O: the opening handshake's checks and
 * Sec-WebSocket-Accept (SHA-1 + base64), an incremental frame parser that assembles messages
 * (masking required, fragmentation, control frames between fragments, a message size cap, UTF-8 of
 * text messages) and a frame writer for the server's unmasked frames. The transport and streams.c
 * drive it; the unit test and the fuzzer drive the same code.
 * Thread-safety: no shared state; a ws_parser is used by one thread at a time. */
#ifndef SRV_WS_H
#define SRV_WS_H

#include <stddef.h>
#include <stdint.h>

#include "http_parse.h"

enum {
    WS_OP_CONT = 0x0, WS_OP_TEXT = 0x1, WS_OP_BINARY = 0x2,
    WS_OP_CLOSE = 0x8, WS_OP_PING = 0x9, WS_OP_PONG = 0xA,
};

/* Close codes (RFC 6455 §7.4.1) the server sends. */
enum {
    WS_CLOSE_NORMAL = 1000, WS_CLOSE_GOING_AWAY = 1001, WS_CLOSE_PROTOCOL = 1002, WS_CLOSE_UNSUPPORTED = 1003,
    WS_CLOSE_INVALID_DATA = 1007, WS_CLOSE_POLICY = 1008, WS_CLOSE_TOO_BIG = 1009, WS_CLOSE_INTERNAL = 1011,
    WS_CLOSE_TRY_AGAIN = 1013,
};

/* SHA-1 of data (FIPS 180-4). */
void ws_sha1(const void *data, size_t len, unsigned char out[20]);
/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + the RFC's GUID)), 28 chars + NUL. */
void ws_accept_key(const char *key, char out[29]);

/* Checks an upgrade request (GET, HTTP/1.1, Upgrade: websocket, Connection: upgrade,
 * Sec-WebSocket-Version: 13, a Sec-WebSocket-Key of 16 base64-encoded bytes). 0 with accept[] set,
 * or the HTTP status to answer (400, 426 for another version: answer with "Sec-WebSocket-Version: 13")
 * and a message in *why. */
unsigned ws_check_upgrade(const hp_request *req, char accept[29], const char **why);

/* 1 when s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF). */
int ws_utf8_valid(const unsigned char *s, size_t n);

/* Writes one unmasked frame header for a payload of len bytes (fin set) into out (at most 10 bytes);
 * returns its length. */
size_t ws_frame_header(unsigned char out[10], int opcode, uint64_t len);

typedef struct {
    /* A whole message (text or binary; text is valid UTF-8). data is the parser's buffer: valid until
     * the callback returns. Return nonzero to stop parsing (ws_parse returns what was consumed). */
    int (*on_message)(void *user, int opcode, const unsigned char *data, size_t len);
    /* A ping, pong or close frame (payload <= 125 bytes, unmasked already). */
    int (*on_control)(void *user, int opcode, const unsigned char *data, size_t len);
} ws_callbacks;

typedef struct {
    size_t max_message;   /* cap on a message's assembled payload (1009 beyond) */
    /* frame header being read */
    unsigned char hdr[14];
    int hdr_len, hdr_need;
    int opcode, fin, masked;
    unsigned char mask[4];
    uint64_t payload_len, payload_got;
    /* the message being assembled (data frames) */
    int msg_opcode;       /* 0: none in progress */
    unsigned char *msg;
    size_t msg_len, msg_cap;
    unsigned char ctl[125];
    /* set when parsing failed: the close code to send and why */
    int failed;
    unsigned close_code;
    const char *reason;
} ws_parser;

void ws_parser_init(ws_parser *p, size_t max_message);
void ws_parser_free(ws_parser *p);
/* Parses in[0..len). Returns the bytes consumed (all of them unless a callback stopped it); after a
 * protocol violation p->failed is set with close_code and reason, and nothing more may be fed. */
size_t ws_parse(ws_parser *p, const unsigned char *in, size_t len, const ws_callbacks *cb, void *user);

#endif
