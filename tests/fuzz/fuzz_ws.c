/* fuzz_ws — the WebSocket frame parser (server/ws.c) on arbitrary bytes, as a client's stream.
 * Input: the first byte picks the message cap (64 << (b % 8) bytes) and the split size for the second
 * pass; the rest is what a client sends after the handshake. Properties: the bytes fed at once and fed
 * in pieces give the same messages, control frames and verdict (the parser is incremental); every
 * message is at most the cap and a text message is valid UTF-8; a control payload is at most 125 bytes;
 * a failure carries a close code the server sends and a reason; nothing leaks (LeakSanitizer).
 * Registered in tests/fuzz/targets.cmake (ctest label fuzz); longer runs: tests/fuzz/run.sh ws SECONDS. */
#include "fuzz_util.h"
#include "ws.h"

typedef struct {
    size_t cap;
    uint64_t hash; /* what the callbacks saw, in order */
    size_t events;
} seen;

static uint64_t mix(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL; /* FNV-1a */
    return (h ^ n) * 1099511628211ULL;
}

static int on_message(void *user, int opcode, const unsigned char *data, size_t len)
{
    seen *s = user;
    FUZZ_CHECK(opcode == WS_OP_TEXT || opcode == WS_OP_BINARY, "message opcode %d", opcode);
    FUZZ_CHECK(len <= s->cap, "message of %zu bytes over the cap %zu", len, s->cap);
    if (opcode == WS_OP_TEXT) FUZZ_CHECK(ws_utf8_valid(data, len), "text message not UTF-8");
    s->hash = mix(s->hash * 31 + (uint64_t)opcode, data, len);
    s->events++;
    return 0;
}

static int on_control(void *user, int opcode, const unsigned char *data, size_t len)
{
    seen *s = user;
    FUZZ_CHECK(opcode == WS_OP_PING || opcode == WS_OP_PONG || opcode == WS_OP_CLOSE, "control opcode %d", opcode);
    FUZZ_CHECK(len <= 125, "control payload of %zu bytes", len);
    s->hash = mix(s->hash * 37 + (uint64_t)opcode, data, len);
    s->events++;
    return 0;
}

static void run(const unsigned char *in, size_t n, size_t cap, size_t piece, seen *s, ws_parser *p)
{
    static const ws_callbacks cb = {on_message, on_control};
    ws_parser_init(p, cap);
    s->cap = cap;
    s->hash = 14695981039346656037ULL;
    s->events = 0;
    size_t off = 0;
    while (off < n && !p->failed) {
        size_t k = n - off < piece ? n - off : piece;
        size_t used = ws_parse(p, in + off, k, &cb, s);
        FUZZ_CHECK(used == k || p->failed, "consumed %zu of %zu without failing", used, k);
        off += used;
        if (p->failed) break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t cap = (size_t)64 << (data[0] % 8), piece = 1 + data[0] / 8;
    const unsigned char *in = data + 1;
    size_t n = size - 1;
    seen whole, pieces;
    ws_parser a, b;
    run(in, n, cap, n ? n : 1, &whole, &a);
    run(in, n, cap, piece, &pieces, &b);
    FUZZ_CHECK(a.failed == b.failed, "verdict differs: at once %d, in pieces of %zu %d", a.failed, piece, b.failed);
    FUZZ_CHECK(whole.events == pieces.events && whole.hash == pieces.hash,
               "at once %zu events, in pieces of %zu %zu events (or other contents)", whole.events, piece, pieces.events);
    if (a.failed) {
        FUZZ_CHECK(a.close_code == b.close_code, "close code %u at once, %u in pieces", a.close_code, b.close_code);
        FUZZ_CHECK(a.close_code == WS_CLOSE_PROTOCOL || a.close_code == WS_CLOSE_INVALID_DATA ||
                       a.close_code == WS_CLOSE_TOO_BIG || a.close_code == WS_CLOSE_POLICY ||
                       a.close_code == WS_CLOSE_UNSUPPORTED || a.close_code == WS_CLOSE_INTERNAL,
                   "close code %u", a.close_code);
        FUZZ_CHECK(a.reason && a.reason[0], "failed without a reason");
    }
    ws_parser_free(&a);
    ws_parser_free(&b);
    return 0;
}
