/* workq.c — a FIFO of items run by a fixed set of threads (workq.h). */
#include "workq.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <stdlib.h>

struct workq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    workq_item *head, *tail;
    int pending, stop, n_threads;
    pthread_t *threads;
};

static void *worker(void *arg)
{
    workq *q = arg;
    prctl(PR_SET_NAME, "rnntd-prep");
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        workq_item *it = q->head;
        if (!it) break; /* stop, and nothing left */
        q->head = it->next;
        if (!q->head) q->tail = NULL;
        q->pending--;
        pthread_mutex_unlock(&q->mu);
        it->run(it);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int workq_create(int threads, workq **out)
{
    *out = NULL;
    workq *q = calloc(1, sizeof *q);
    if (!q) return -1;
    if (threads < 1) threads = 1;
    q->threads = calloc((size_t)threads, sizeof *q->threads);
    if (!q->threads) {
        free(q);
        return -1;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&q->threads[i], NULL, worker, q)) break;
        q->n_threads++;
    }
    if (q->n_threads == 0) {
        workq_free(q);
        return -1;
    }
    *out = q;
    return 0;
}

void workq_submit(workq *q, workq_item *it)
{
    it->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = it;
    else q->head = it;
    q->tail = it;
    q->pending++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

int workq_pending(workq *q)
{
    pthread_mutex_lock(&q->mu);
    int n = q->pending;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void workq_free(workq *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < q->n_threads; i++) pthread_join(q->threads[i], NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->threads);
    free(q);
}
