/* loadc — the hot loop of tests/bench/loadgen.py --client c: closed-loop HTTP clients on one epoll thread.
 *
 *   loadc HOST PORT CONCURRENCY WARMUP_S DURATION_S TIMEOUT_S REQUEST_FILE...
 *
 * Each REQUEST_FILE holds one whole prepared HTTP/1.1 request (head and body). Client k keeps one
 * keep-alive connection and sends files k, k + C, k + 2C, ... (round robin) back to back. Answers must
 * carry Content-Length (rnntd's always do). Requests that start after WARMUP_S and end before
 * WARMUP_S + DURATION_S are measured; loadgen.py reads the lines printed at the end:
 *   R status latency_s duration_s batch_size queue_ms compute_ms total_ms   (one per measured answer)
 *   E message                                                           (one per measured connection error)
 *   C cpu_seconds_of_this_process_while_measuring
 * Why C: the Python clients took ~5.7 of the H100 host's 16 cores at ~8k requests/s (issue 16).
 * The numbers of an answer are read by looking up their keys in its text (rnntd's answers carry each of
 * them once, at the top level, after "tokens"; inside a JSON string a quote is escaped, so a key's text
 * cannot match there): parsing the whole ~10 KB document with jansson was ~70% of this program's CPU
 * (~1 ms per answer on the H100 host, 8 processes saturated at ~7.7k answers/s). LOADC_JSON=1 parses
 * each answer with jansson instead (a document that does not parse then reads as -1 everywhere). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOADC_RETRY_S 0.01

typedef struct {
    char *data;
    size_t len;
} blob;

typedef struct {
    int fd;
    size_t next;        /* index of the next request file */
    const blob *req;    /* the request in flight */
    size_t sent;
    char *buf;          /* the answer so far */
    size_t len, cap;
    long long want;     /* head + body bytes of the answer, once the head is complete; -1 before */
    double t0;          /* the request's start */
    double retry_at;    /* after a failed connection: no new one before this (no busy loop while the server is away) */
} client;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int read_file(const char *path, blob *b)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct stat st;
    if (fstat(fileno(f), &st) || st.st_size <= 0) {
        fclose(f);
        return -1;
    }
    b->len = (size_t)st.st_size;
    b->data = malloc(b->len);
    int ok = b->data && fread(b->data, 1, b->len, f) == b->len;
    fclose(f);
    return ok ? 0 : -1;
}

static int connect_to(const struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The answer's head is complete: its length in all, or -1 (no Content-Length: an error). */
static long long answer_size(const char *buf, size_t len)
{
    const char *end = memmem(buf, len, "\r\n\r\n", 4);
    if (!end) return -2;
    size_t head = (size_t)(end - buf) + 4;
    for (const char *p = buf; p < end;) {
        const char *eol = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
        if (!eol) break;
        if ((size_t)(eol - p) > 15 && !strncasecmp(p, "content-length:", 15)) {
            long long n = strtoll(p + 15, NULL, 10);
            return n < 0 ? -1 : (long long)head + n;
        }
        p = eol + 2;
    }
    return -1;
}

static double num(json_t *o, const char *k)
{
    json_t *v = o ? json_object_get(o, k) : NULL;
    return json_is_number(v) ? json_number_value(v) : -1.0;
}

/* The number after the key "k": in body[0, len) (NUL-terminated at len), or -1 when absent. */
static double scan_num(const char *body, size_t len, const char *k)
{
    char pat[40];
    int n = snprintf(pat, sizeof pat, "\"%s\":", k);
    const char *p = memmem(body, len, pat, (size_t)n);
    if (!p) return -1.0;
    char *end = NULL;
    double v = strtod(p + n, &end);
    return end == p + n ? -1.0 : v;
}

/* One whole answer: its line (when measured). */
static void record(const client *c, double t_end, double m0, double m1)
{
    if (c->t0 < m0 || t_end > m1) return;
    int status = 0;
    sscanf(c->buf, "HTTP/1.%*d %d", &status);
    const char *body = memmem(c->buf, c->len, "\r\n\r\n", 4);
    static int use_json = -1;
    if (use_json < 0) use_json = getenv("LOADC_JSON") && !strcmp(getenv("LOADC_JSON"), "1");
    if (!use_json) {
        size_t blen = body ? c->len - (size_t)(body + 4 - c->buf) : 0;
        const char *b = body ? body + 4 : "";
        printf("R %d %.6f %.4f %.0f %.4f %.4f %.4f\n", status, t_end - c->t0, scan_num(b, blen, "duration_s"),
               scan_num(b, blen, "batch_size"), scan_num(b, blen, "queue_ms"), scan_num(b, blen, "compute_ms"),
               scan_num(b, blen, "total_ms"));
        return;
    }
    json_t *doc = body ? json_loadb(body + 4, c->len - (size_t)(body + 4 - c->buf), 0, NULL) : NULL;
    json_t *tm = doc ? json_object_get(doc, "timings") : NULL;
    printf("R %d %.6f %.4f %.0f %.4f %.4f %.4f\n", status, t_end - c->t0, num(doc, "duration_s"), num(doc, "batch_size"),
           num(tm, "queue_ms"), num(tm, "compute_ms"), num(tm, "total_ms"));
    json_decref(doc);
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: loadc HOST PORT CONCURRENCY WARMUP_S DURATION_S TIMEOUT_S REQUEST_FILE...\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
        struct hostent *he = gethostbyname(argv[1]);
        if (!he || he->h_addrtype != AF_INET) {
            fprintf(stderr, "loadc: unknown host %s\n", argv[1]);
            return 2;
        }
        memcpy(&addr.sin_addr, he->h_addr_list[0], sizeof addr.sin_addr);
    }
    int n_clients = atoi(argv[3]);
    double warmup = atof(argv[4]), duration = atof(argv[5]), timeout = atof(argv[6]);
    size_t n_req = (size_t)(argc - 7);
    if (n_clients < 1 || duration <= 0 || timeout <= 0 || warmup < 0) {
        fprintf(stderr, "loadc: CONCURRENCY >= 1, DURATION_S > 0, TIMEOUT_S > 0 and WARMUP_S >= 0, please\n");
        return 2;
    }
    blob *reqs = calloc(n_req, sizeof *reqs);
    client *cl = calloc((size_t)n_clients, sizeof *cl);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!reqs || !cl || ep < 0) return 1;
    for (size_t i = 0; i < n_req; i++)
        if (read_file(argv[7 + i], &reqs[i])) {
            fprintf(stderr, "loadc: %s: cannot read it (or it is empty)\n", argv[7 + i]);
            return 2;
        }

    const double t_start = now_s(), m0 = t_start + warmup, m1 = m0 + duration;
    double cpu0 = -1;
    long errors_total = 0;
    /* start(k): a request on client k's connection, connecting first when it has none */
    for (int k = 0; k < n_clients; k++) {
        cl[k].fd = -1;
        cl[k].next = (size_t)k;
    }
    int live = 0;
    for (;;) {
        double t = now_s();
        if (cpu0 < 0 && t >= m0) cpu0 = cpu_s();
        if (t >= m1 && live == 0) break;
        for (int k = 0; k < n_clients; k++) {
            client *c = &cl[k];
            if (c->req) {
                if (t - c->t0 > timeout) { /* give the request up, and its connection */
                    if (c->t0 >= m0 && t <= m1) printf("E timeout\n"), errors_total++;
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    c->fd = -1;
                    c->req = NULL;
                    live--;
                }
                continue;
            }
            if (t >= m1 || t < c->retry_at) continue;
            if (c->fd < 0) {
                c->fd = connect_to(&addr);
                if (c->fd < 0) {
                    if (t >= m0) printf("E connect: %s\n", strerror(errno)), errors_total++;
                    c->retry_at = t + LOADC_RETRY_S;
                    continue;
                }
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = (uint32_t)k};
                epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
            } else {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = (uint32_t)k};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            }
            c->req = &reqs[c->next % n_req];
            c->next += (size_t)n_clients;
            c->sent = c->len = 0;
            c->want = -2;
            c->t0 = t;
            live++;
        }
        struct epoll_event evs[256];
        int n = epoll_wait(ep, evs, 256, 50);
        if (n < 0 && errno != EINTR) return 1;
        for (int i = 0; i < n; i++) {
            client *c = &cl[evs[i].data.u32];
            if (!c->req) continue;
            int broken = (evs[i].events & EPOLLERR) != 0;
            if (!broken && (evs[i].events & EPOLLOUT) && c->sent < c->req->len) {
                ssize_t w = send(c->fd, c->req->data + c->sent, c->req->len - c->sent, MSG_NOSIGNAL);
                if (w > 0) c->sent += (size_t)w;
                else if (w < 0 && errno != EAGAIN && errno != EINTR) broken = 1;
                if (!broken && c->sent == c->req->len) {
                    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = evs[i].data.u32};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            while (!broken && (evs[i].events & (EPOLLIN | EPOLLHUP))) {
                if (c->cap - c->len < 65536) {
                    size_t nc = c->cap ? c->cap * 2 : 131072;
                    char *nb = realloc(c->buf, nc + 1);
                    if (!nb) return 1;
                    c->buf = nb;
                    c->cap = nc;
                }
                ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
                if (r <= 0) {
                    broken = 1;
                    break;
                }
                c->len += (size_t)r;
                c->buf[c->len] = '\0';
                if (c->want == -2) c->want = answer_size(c->buf, c->len);
                if (c->want == -1) broken = 1;
                if (c->want >= 0 && (long long)c->len >= c->want) {
                    double t_end = now_s();
                    record(c, t_end, m0, m1);
                    c->req = NULL;
                    live--;
                    const char *head_end = memmem(c->buf, c->len, "\r\n\r\n", 4);
                    if (head_end && memmem(c->buf, (size_t)(head_end - c->buf), "onnection: close", 16)) {
                        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL); /* the server ends the connection: a new one */
                        close(c->fd);
                        c->fd = -1;
                    }
                    break;
                }
            }
            if (broken) {
                if (c->t0 >= m0 && c->t0 <= m1) printf("E connection closed or failed\n"), errors_total++;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = -1;
                c->req = NULL;
                c->retry_at = now_s() + LOADC_RETRY_S;
                live--;
            }
        }
    }
    printf("C %.6f\n", cpu0 < 0 ? 0.0 : cpu_s() - cpu0);
    for (int k = 0; k < n_clients; k++) {
        if (cl[k].fd >= 0) close(cl[k].fd);
        free(cl[k].buf);
    }
    for (size_t i = 0; i < n_req; i++) free(reqs[i].data);
    free(reqs);
    free(cl);
    close(ep);
    return errors_total ? 1 : 0;
}
