/* cu_stage.cu — chunked, multi-threaded host staging with transfers as chunks complete (cu_stage.h).
 *
 * One call: the destination range is cut into chunks of s->chunk bytes; the caller and the helpers
 * take chunk indices from one counter and copy them (a chunk may span several utterances); a chunk
 * that is done is marked with the call's sequence number; the caller, between its own chunks and
 * after them, sends the longest finished prefix that has not been sent yet as one transfer. The call
 * returns only after every helper has left the call, so the next call may reuse the job fields. */
#include "cu_stage.h"

#include <sched.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

struct cu_stager {
    int helpers;
    size_t chunk;
    std::vector<std::thread> threads;
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    unsigned long gen = 0;      /* bumped (under mu) when a call hands out work */
    std::atomic<int> running{0}; /* helpers still inside the current call */
    /* the current call's job (written by the caller while every helper is idle) */
    const void *const *src = nullptr;
    std::vector<size_t> off;    /* [n + 1] byte offset of each segment in the destination */
    int n = 0;
    char *dst = nullptr;
    size_t total = 0;
    int nchunks = 0;
    std::atomic<int> next{0};
    unsigned seq = 0;
    std::unique_ptr<std::atomic<unsigned>[]> done;
    int done_cap = 0;
};

namespace {

/* Copies destination bytes [a, b) of the current job from their segments. */
void copy_range(cu_stager *s, size_t a, size_t b)
{
    /* the segment holding byte a: the last i with off[i] <= a */
    int i = (int)(std::upper_bound(s->off.begin(), s->off.begin() + s->n + 1, a) - s->off.begin()) - 1;
    while (a < b && i < s->n) {
        size_t seg_end = s->off[i + 1];
        size_t e = seg_end < b ? seg_end : b;
        if (e > a) memcpy(s->dst + a, (const char *)s->src[i] + (a - s->off[i]), e - a);
        a = e;
        i++;
    }
}

void copy_chunk(cu_stager *s, int c)
{
    size_t a = (size_t)c * s->chunk, b = a + s->chunk < s->total ? a + s->chunk : s->total;
    copy_range(s, a, b);
    s->done[c].store(s->seq, std::memory_order_release);
}

/* Take and copy chunks until none is left. */
void work(cu_stager *s)
{
    for (;;) {
        int c = s->next.fetch_add(1, std::memory_order_relaxed);
        if (c >= s->nchunks) return;
        copy_chunk(s, c);
    }
}

void helper_main(cu_stager *s)
{
    prctl(PR_SET_NAME, "rnnt-stage");
    unsigned long seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(s->mu);
            s->cv.wait(lk, [&] { return s->stop || s->gen != seen; });
            if (s->stop) return;
            seen = s->gen;
        }
        work(s);
        s->running.fetch_sub(1, std::memory_order_release);
    }
}

int default_helpers(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    long h = n / 4;
    return (int)(h < 0 ? 0 : h > 3 ? 3 : h);
}

} // namespace

rnnt_status cu_stager_create(int helpers, size_t chunk, cu_stager **out, char *err, size_t errlen)
{
    *out = NULL;
    if (helpers < 0) helpers = default_helpers();
    if (helpers > CU_STAGE_MAX_HELPERS) helpers = CU_STAGE_MAX_HELPERS;
    cu_stager *s = new (std::nothrow) cu_stager;
    if (!s) return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    s->helpers = helpers;
    s->chunk = chunk ? chunk : CU_STAGE_CHUNK_DEFAULT;
    try {
        for (int i = 0; i < helpers; i++) s->threads.emplace_back(helper_main, s);
    } catch (...) {
        cu_stager_free(s);
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: cannot start %d staging threads", helpers);
    }
    *out = s;
    return RNNT_OK;
}

void cu_stager_free(cu_stager *s)
{
    if (!s) return;
    {
        std::lock_guard<std::mutex> lk(s->mu);
        s->stop = true;
    }
    s->cv.notify_all();
    for (auto &t : s->threads) t.join();
    delete s;
}

int cu_stager_helpers(const cu_stager *s) { return s->helpers; }
size_t cu_stager_chunk(const cu_stager *s) { return s->chunk; }

rnnt_status cu_stager_copy(cu_stager *s, int n, const void *const *src, const size_t *bytes, void *pinned, void *dev,
                           cudaStream_t stream, char *err, size_t errlen)
{
    size_t total = 0;
    try {
        s->off.resize((size_t)n + 1);
    } catch (...) {
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    }
    for (int i = 0; i < n; i++) {
        s->off[i] = total;
        total += bytes[i];
    }
    s->off[n] = total;
    if (total == 0) return RNNT_OK;
    size_t nch = (total + s->chunk - 1) / s->chunk;
    if (nch > (size_t)1 << 30) return cu_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "cuda: %zu bytes to stage", total);
    int nchunks = (int)nch;
    if (nchunks > s->done_cap) {
        std::atomic<unsigned> *d = new (std::nothrow) std::atomic<unsigned>[nchunks];
        if (!d) return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
        for (int i = 0; i < nchunks; i++) d[i].store(0, std::memory_order_relaxed);
        s->done.reset(d);
        s->done_cap = nchunks;
    }
    s->src = src;
    s->n = n;
    s->dst = (char *)pinned;
    s->total = total;
    s->nchunks = nchunks;
    s->next.store(0, std::memory_order_relaxed);
    if (++s->seq == 0) { /* wrapped: no stale mark may equal the new sequence number */
        for (int i = 0; i < s->done_cap; i++) s->done[i].store(0, std::memory_order_relaxed);
        s->seq = 1;
    }
    int woken = nchunks >= 2 ? s->helpers : 0;
    if (woken) {
        {
            std::lock_guard<std::mutex> lk(s->mu);
            s->running.store(woken, std::memory_order_relaxed);
            s->gen++;
        }
        s->cv.notify_all();
    }
    /* The caller copies too, and sends every finished prefix between its chunks. */
    int sent = 0;
    cudaError_t ce = cudaSuccess;
    auto send_ready = [&] {
        int upto = sent;
        while (upto < nchunks && s->done[upto].load(std::memory_order_acquire) == s->seq) upto++;
        if (upto == sent) return false;
        size_t a = (size_t)sent * s->chunk, b = (size_t)upto * s->chunk < total ? (size_t)upto * s->chunk : total;
        if (ce == cudaSuccess)
            ce = cudaMemcpyAsync((char *)dev + a, (const char *)pinned + a, b - a, cudaMemcpyHostToDevice, stream);
        sent = upto;
        return true;
    };
    for (;;) {
        int c = s->next.fetch_add(1, std::memory_order_relaxed);
        if (c >= nchunks) break;
        copy_chunk(s, c);
        send_ready();
    }
    while (sent < nchunks)
        if (!send_ready()) sched_yield();
    /* helpers that woke late still have to see that nothing is left before the job may change */
    while (woken && s->running.load(std::memory_order_acquire) > 0) sched_yield();
    if (ce != cudaSuccess)
        return cu_set_err(err, errlen, cu_status_of(ce), "cuda: staging transfer of %zu bytes: %s", total,
                          cudaGetErrorString(ce));
    return RNNT_OK;
}
